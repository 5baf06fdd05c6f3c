CREATE TABLE `account_links` (
	`id` text PRIMARY KEY NOT NULL,
	`token_hash` text NOT NULL,
	`purpose` text NOT NULL,
	`email` text NOT NULL,
	`user_id` text,
	`created_at` text NOT NULL,
	`expires_at` text NOT NULL,
	`used_at` text,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `account_links_token` ON `account_links` (`token_hash`);--> statement-breakpoint
CREATE TABLE `audit_events` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`id` text NOT NULL,
	`project_id` text,
	`at` text NOT NULL,
	`action` text NOT NULL,
	`category` text NOT NULL,
	`actor_user_id` text,
	`target_type` text NOT NULL,
	`target_id` text NOT NULL,
	`metadata` text DEFAULT '{}' NOT NULL,
	`prev_hash` text NOT NULL,
	`hash` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `audit_events_id` ON `audit_events` (`id`);--> statement-breakpoint
CREATE INDEX `audit_events_project_at` ON `audit_events` (`project_id`,`at`,`id`);--> statement-breakpoint
CREATE INDEX `audit_events_project_category_at` ON `audit_events` (`project_id`,`category`,`at`,`id`);--> statement-breakpoint
CREATE INDEX `audit_events_project_action_at` ON `audit_events` (`project_id`,`action`,`at`,`id`);--> statement-breakpoint
CREATE INDEX `audit_events_project_actor_at` ON `audit_events` (`project_id`,`actor_user_id`,`at`,`id`);--> statement-breakpoint
CREATE TABLE `browser_sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`user_id` text NOT NULL,
	`token_hash` text NOT NULL,
	`created_at` text NOT NULL,
	`last_seen_at` text NOT NULL,
	`expires_at` text NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `browser_sessions_token` ON `browser_sessions` (`token_hash`);--> statement-breakpoint
CREATE INDEX `browser_sessions_user` ON `browser_sessions` (`user_id`);--> statement-breakpoint
CREATE TABLE `cli_sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`user_id` text NOT NULL,
	`device_name` text NOT NULL,
	`created_at` text NOT NULL,
	`last_used_at` text NOT NULL,
	`expires_at` text NOT NULL,
	`revoked_at` text,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `cli_sessions_user` ON `cli_sessions` (`user_id`);--> statement-breakpoint
CREATE TABLE `cli_tokens` (
	`id` text PRIMARY KEY NOT NULL,
	`session_id` text NOT NULL,
	`kind` text NOT NULL,
	`token_hash` text NOT NULL,
	`created_at` text NOT NULL,
	`expires_at` text NOT NULL,
	`used_at` text,
	FOREIGN KEY (`session_id`) REFERENCES `cli_sessions`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `cli_tokens_hash` ON `cli_tokens` (`token_hash`);--> statement-breakpoint
CREATE INDEX `cli_tokens_session` ON `cli_tokens` (`session_id`);--> statement-breakpoint
CREATE TABLE `cli_device_requests` (
	`id` text PRIMARY KEY NOT NULL,
	`device_code_hash` text NOT NULL,
	`user_code_hash` text NOT NULL,
	`device_name` text NOT NULL,
	`status` text NOT NULL,
	`approved_by` text,
	`created_at` text NOT NULL,
	`expires_at` text NOT NULL,
	`last_polled_at` text,
	FOREIGN KEY (`approved_by`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `cli_device_requests_device` ON `cli_device_requests` (`device_code_hash`);--> statement-breakpoint
CREATE INDEX `cli_device_requests_user` ON `cli_device_requests` (`user_code_hash`);--> statement-breakpoint
CREATE TABLE `environment_grants` (
	`project_id` text NOT NULL,
	`user_id` text NOT NULL,
	`environment` text NOT NULL,
	`granted_by` text,
	`created_at` text NOT NULL,
	PRIMARY KEY(`project_id`, `user_id`, `environment`),
	FOREIGN KEY (`project_id`,`user_id`) REFERENCES `memberships`(`project_id`,`user_id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`project_id`,`environment`) REFERENCES `project_environments`(`project_id`,`slug`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `integration_vars` (
	`project_id` text NOT NULL,
	`target` text NOT NULL,
	`key` text NOT NULL,
	`host_env_id` text NOT NULL,
	`created_at` text NOT NULL,
	PRIMARY KEY(`project_id`, `target`, `key`),
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `integrations` (
	`project_id` text PRIMARY KEY NOT NULL,
	`provider` text DEFAULT 'vercel' NOT NULL,
	`status` text NOT NULL,
	`token_ciphertext` blob NOT NULL,
	`token_key_version` integer NOT NULL,
	`team_id` text,
	`host_project_id` text,
	`host_project_name` text,
	`mappings` text DEFAULT '{}' NOT NULL,
	`conflict_policy` text DEFAULT 'skip' NOT NULL,
	`auto_redeploy` integer DEFAULT false NOT NULL,
	`hook_ciphertext` blob,
	`hook_key_version` integer,
	`last_sync_at` text,
	`last_sync_status` text,
	`last_error` text,
	`sync_started_at` text,
	`pending` integer DEFAULT 0 NOT NULL,
	`last_run` text,
	`last_deployment` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `invitations` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`email` text NOT NULL,
	`role` text NOT NULL,
	`environments` text DEFAULT '[]' NOT NULL,
	`token_hash` text NOT NULL,
	`invited_by` text,
	`created_at` text NOT NULL,
	`expires_at` text NOT NULL,
	`accepted_at` text,
	`accepted_by` text,
	`delivery_status` text DEFAULT 'not_configured' NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `invitations_token` ON `invitations` (`token_hash`);--> statement-breakpoint
CREATE INDEX `invitations_project` ON `invitations` (`project_id`);--> statement-breakpoint
CREATE INDEX `invitations_email` ON `invitations` (`email`);--> statement-breakpoint
CREATE TABLE `key_checks` (
	`version` integer PRIMARY KEY NOT NULL,
	`check_value` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `memberships` (
	`project_id` text NOT NULL,
	`user_id` text NOT NULL,
	`role` text NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	PRIMARY KEY(`project_id`, `user_id`),
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `memberships_user` ON `memberships` (`user_id`);--> statement-breakpoint
CREATE TABLE `project_environments` (
	`project_id` text NOT NULL,
	`slug` text NOT NULL,
	`created_at` text NOT NULL,
	PRIMARY KEY(`project_id`, `slug`),
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `project_keys` (
	`project_id` text NOT NULL,
	`key_version` integer NOT NULL,
	`wrapped_key` blob NOT NULL,
	`created_at` text NOT NULL,
	PRIMARY KEY(`project_id`, `key_version`),
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `projects` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`description` text,
	`created_by` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	FOREIGN KEY (`created_by`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE set null
);
--> statement-breakpoint
CREATE INDEX `projects_updated` ON `projects` (`updated_at`);--> statement-breakpoint
CREATE TABLE `secret_versions` (
	`secret_id` text NOT NULL,
	`version_number` integer NOT NULL,
	`project_id` text NOT NULL,
	`key` text NOT NULL,
	`change_type` text NOT NULL,
	`restored_from_version` integer,
	`ciphertext` blob NOT NULL,
	`key_version` integer NOT NULL,
	`changed_by` text,
	`created_at` text NOT NULL,
	PRIMARY KEY(`secret_id`, `version_number`),
	FOREIGN KEY (`secret_id`) REFERENCES `secrets`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `secret_versions_key_version` ON `secret_versions` (`key_version`);--> statement-breakpoint
CREATE INDEX `secret_versions_project` ON `secret_versions` (`project_id`);--> statement-breakpoint
CREATE TABLE `secrets` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`environment` text NOT NULL,
	`key` text NOT NULL,
	`version` integer NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	FOREIGN KEY (`project_id`,`environment`) REFERENCES `project_environments`(`project_id`,`slug`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `secrets_env_key` ON `secrets` (`project_id`,`environment`,`key`);--> statement-breakpoint
CREATE INDEX `secrets_env_updated` ON `secrets` (`project_id`,`environment`,`updated_at`);--> statement-breakpoint
CREATE TABLE `users` (
	`id` text PRIMARY KEY NOT NULL,
	`email` text,
	`email_verified` integer DEFAULT false NOT NULL,
	`name` text,
	`auth_issuer` text NOT NULL,
	`auth_subject` text NOT NULL,
	`password_hash` text,
	`disabled_at` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `users_identity` ON `users` (`auth_issuer`,`auth_subject`);--> statement-breakpoint
CREATE INDEX `users_email` ON `users` (`email`);