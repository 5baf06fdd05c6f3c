DROP INDEX `secrets_env_updated`;--> statement-breakpoint
CREATE INDEX `secrets_env_updated_id` ON `secrets` (`project_id`,`environment`,`updated_at`,`id`);