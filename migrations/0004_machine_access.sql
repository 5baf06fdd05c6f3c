CREATE TABLE `service_account_trusts` (
	`id` text PRIMARY KEY NOT NULL,
	`service_account_id` text NOT NULL,
	`issuer` text NOT NULL,
	`audience` text NOT NULL,
	`subject` text NOT NULL,
	`claims` text DEFAULT '{}' NOT NULL,
	`created_by` text,
	`created_at` text NOT NULL,
	`last_audited_at` text,
	FOREIGN KEY (`service_account_id`) REFERENCES `service_accounts`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `service_account_trusts_account` ON `service_account_trusts` (`service_account_id`);--> statement-breakpoint
CREATE TABLE `service_accounts` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`name` text NOT NULL,
	`description` text,
	`role` text NOT NULL,
	`environments` text NOT NULL,
	`created_by` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `service_accounts_project` ON `service_accounts` (`project_id`);--> statement-breakpoint
CREATE TABLE `service_tokens` (
	`id` text PRIMARY KEY NOT NULL,
	`service_account_id` text NOT NULL,
	`kind` text NOT NULL,
	`token_hash` text NOT NULL,
	`name` text NOT NULL,
	`allowed_cidrs` text DEFAULT '[]' NOT NULL,
	`trust_id` text,
	`created_by` text,
	`created_at` text NOT NULL,
	`expires_at` text,
	`last_used_at` text,
	`last_used_ip` text,
	FOREIGN KEY (`service_account_id`) REFERENCES `service_accounts`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`trust_id`) REFERENCES `service_account_trusts`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `service_tokens_hash` ON `service_tokens` (`token_hash`);--> statement-breakpoint
CREATE INDEX `service_tokens_account` ON `service_tokens` (`service_account_id`,`kind`);--> statement-breakpoint
ALTER TABLE `audit_events` ADD `service_account_id` text;--> statement-breakpoint
ALTER TABLE `audit_events` ADD `service_account_name` text;--> statement-breakpoint
CREATE INDEX `audit_events_project_service_account_at` ON `audit_events` (`project_id`,`service_account_id`,`at`,`id`);--> statement-breakpoint
ALTER TABLE `secret_versions` ADD `changed_by_service_account_id` text;--> statement-breakpoint
ALTER TABLE `secret_versions` ADD `changed_by_service_account_name` text;