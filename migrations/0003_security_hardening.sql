ALTER TABLE `audit_events` ADD `mac_key_version` integer;--> statement-breakpoint
ALTER TABLE `integrations` ADD `connected_by` text;--> statement-breakpoint
ALTER TABLE `integrations` ADD `paused_at` text;--> statement-breakpoint
ALTER TABLE `integrations` ADD `paused_reason` text;--> statement-breakpoint
ALTER TABLE `sign_in_failures` ADD `address_hash` text;--> statement-breakpoint
CREATE INDEX `sign_in_failures_pair` ON `sign_in_failures` (`account_hash`,`address_hash`,`failed_at`);