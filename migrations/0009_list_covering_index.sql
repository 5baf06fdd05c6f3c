DROP INDEX `secrets_env_updated_id`;--> statement-breakpoint
CREATE INDEX `secrets_env_list` ON `secrets` (`project_id`,`environment`,`updated_at`,`id`,`key`,`version`,`created_at`);