DROP INDEX `audit_events_id`;--> statement-breakpoint
ALTER TABLE `secret_versions` ADD `digest` text;