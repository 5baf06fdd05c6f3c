CREATE TABLE `audit_checkpoint` (
	`id` integer PRIMARY KEY NOT NULL,
	`seq` integer NOT NULL,
	`hash` text NOT NULL,
	`at` text NOT NULL,
	`is_keyed` integer NOT NULL,
	`pruned_before` text NOT NULL,
	`pruned_events` integer NOT NULL,
	`mac_key_version` integer NOT NULL,
	`mac` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `rate_limit_windows` (
	`key` text PRIMARY KEY NOT NULL,
	`count` integer NOT NULL,
	`started_at` text NOT NULL,
	`expires_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `rate_limit_windows_expires` ON `rate_limit_windows` (`expires_at`);