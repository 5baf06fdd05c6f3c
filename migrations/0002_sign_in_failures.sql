CREATE TABLE `sign_in_failures` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`account_hash` text NOT NULL,
	`failed_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `sign_in_failures_account` ON `sign_in_failures` (`account_hash`,`failed_at`);--> statement-breakpoint
CREATE INDEX `sign_in_failures_at` ON `sign_in_failures` (`failed_at`);