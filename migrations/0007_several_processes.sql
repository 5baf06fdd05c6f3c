CREATE TABLE `leases` (
	`name` text PRIMARY KEY NOT NULL,
	`owner` text NOT NULL,
	`heartbeat_at` text NOT NULL
);
--> statement-breakpoint
DROP INDEX `audit_events_project_at`;--> statement-breakpoint
DROP INDEX `audit_events_project_category_at`;--> statement-breakpoint
DROP INDEX `audit_events_project_action_at`;--> statement-breakpoint
DROP INDEX `audit_events_project_actor_at`;--> statement-breakpoint
DROP INDEX `audit_events_project_actor_category_at`;--> statement-breakpoint
DROP INDEX `audit_events_project_actor_action_at`;--> statement-breakpoint
DROP INDEX `audit_events_project_service_account_at`;--> statement-breakpoint
CREATE INDEX `audit_events_project_at_seq` ON `audit_events` (`project_id`,`at`);--> statement-breakpoint
CREATE INDEX `audit_events_project_category_at_seq` ON `audit_events` (`project_id`,`category`,`at`);--> statement-breakpoint
CREATE INDEX `audit_events_project_action_at_seq` ON `audit_events` (`project_id`,`action`,`at`);--> statement-breakpoint
CREATE INDEX `audit_events_project_actor_at_seq` ON `audit_events` (`project_id`,`actor_user_id`,`at`);--> statement-breakpoint
CREATE INDEX `audit_events_project_actor_category_at_seq` ON `audit_events` (`project_id`,`actor_user_id`,`category`,`at`);--> statement-breakpoint
CREATE INDEX `audit_events_project_actor_action_at_seq` ON `audit_events` (`project_id`,`actor_user_id`,`action`,`at`);--> statement-breakpoint
CREATE INDEX `audit_events_project_service_account_at_seq` ON `audit_events` (`project_id`,`service_account_id`,`at`);--> statement-breakpoint
ALTER TABLE `integrations` ADD `sync_owner` text;--> statement-breakpoint
ALTER TABLE `integrations` ADD `sync_heartbeat_at` text;