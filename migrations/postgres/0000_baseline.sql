CREATE TABLE "account_links" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"token_hash" text COLLATE "C" NOT NULL,
	"purpose" text COLLATE "C" NOT NULL,
	"email" text COLLATE "C" NOT NULL,
	"user_id" text COLLATE "C",
	"created_at" text COLLATE "C" NOT NULL,
	"expires_at" text COLLATE "C" NOT NULL,
	"used_at" text COLLATE "C"
);
--> statement-breakpoint
CREATE TABLE "audit_checkpoint" (
	"id" integer PRIMARY KEY NOT NULL,
	"seq" bigint NOT NULL,
	"hash" text COLLATE "C" NOT NULL,
	"at" text COLLATE "C" NOT NULL,
	"is_keyed" boolean NOT NULL,
	"pruned_before" text COLLATE "C" NOT NULL,
	"pruned_events" integer NOT NULL,
	"mac_key_version" integer NOT NULL,
	"mac" text COLLATE "C" NOT NULL
);
--> statement-breakpoint
CREATE TABLE "audit_events" (
	"seq" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "audit_events_seq_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"id" text COLLATE "C" NOT NULL,
	"project_id" text COLLATE "C",
	"at" text COLLATE "C" NOT NULL,
	"action" text COLLATE "C" NOT NULL,
	"category" text COLLATE "C" NOT NULL,
	"actor_user_id" text COLLATE "C",
	"target_type" text COLLATE "C" NOT NULL,
	"target_id" text COLLATE "C" NOT NULL,
	"metadata" text COLLATE "C" DEFAULT '{}' NOT NULL,
	"prev_hash" text COLLATE "C" NOT NULL,
	"hash" text COLLATE "C" NOT NULL,
	"mac_key_version" integer,
	"service_account_id" text COLLATE "C",
	"service_account_name" text COLLATE "C"
);
--> statement-breakpoint
CREATE TABLE "browser_sessions" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"user_id" text COLLATE "C" NOT NULL,
	"token_hash" text COLLATE "C" NOT NULL,
	"created_at" text COLLATE "C" NOT NULL,
	"last_seen_at" text COLLATE "C" NOT NULL,
	"expires_at" text COLLATE "C" NOT NULL
);
--> statement-breakpoint
CREATE TABLE "cli_sessions" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"user_id" text COLLATE "C" NOT NULL,
	"device_name" text COLLATE "C" NOT NULL,
	"created_at" text COLLATE "C" NOT NULL,
	"last_used_at" text COLLATE "C" NOT NULL,
	"expires_at" text COLLATE "C" NOT NULL,
	"revoked_at" text COLLATE "C"
);
--> statement-breakpoint
CREATE TABLE "cli_tokens" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"session_id" text COLLATE "C" NOT NULL,
	"kind" text COLLATE "C" NOT NULL,
	"token_hash" text COLLATE "C" NOT NULL,
	"created_at" text COLLATE "C" NOT NULL,
	"expires_at" text COLLATE "C" NOT NULL,
	"used_at" text COLLATE "C"
);
--> statement-breakpoint
CREATE TABLE "cli_device_requests" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"device_code_hash" text COLLATE "C" NOT NULL,
	"user_code_hash" text COLLATE "C" NOT NULL,
	"device_name" text COLLATE "C" NOT NULL,
	"status" text COLLATE "C" NOT NULL,
	"approved_by" text COLLATE "C",
	"created_at" text COLLATE "C" NOT NULL,
	"expires_at" text COLLATE "C" NOT NULL,
	"last_polled_at" text COLLATE "C"
);
--> statement-breakpoint
CREATE TABLE "environment_grants" (
	"project_id" text COLLATE "C" NOT NULL,
	"user_id" text COLLATE "C" NOT NULL,
	"environment" text COLLATE "C" NOT NULL,
	"granted_by" text COLLATE "C",
	"created_at" text COLLATE "C" NOT NULL,
	CONSTRAINT "environment_grants_project_id_user_id_environment_pk" PRIMARY KEY("project_id","user_id","environment")
);
--> statement-breakpoint
CREATE TABLE "integration_vars" (
	"project_id" text COLLATE "C" NOT NULL,
	"target" text COLLATE "C" NOT NULL,
	"key" text COLLATE "C" NOT NULL,
	"host_env_id" text COLLATE "C" NOT NULL,
	"created_at" text COLLATE "C" NOT NULL,
	CONSTRAINT "integration_vars_project_id_target_key_pk" PRIMARY KEY("project_id","target","key")
);
--> statement-breakpoint
CREATE TABLE "integrations" (
	"project_id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"provider" text COLLATE "C" DEFAULT 'vercel' NOT NULL,
	"status" text COLLATE "C" NOT NULL,
	"token_ciphertext" "bytea" NOT NULL,
	"token_key_version" integer NOT NULL,
	"team_id" text COLLATE "C",
	"host_project_id" text COLLATE "C",
	"host_project_name" text COLLATE "C",
	"mappings" text COLLATE "C" DEFAULT '{}' NOT NULL,
	"conflict_policy" text COLLATE "C" DEFAULT 'skip' NOT NULL,
	"auto_redeploy" boolean DEFAULT false NOT NULL,
	"hook_ciphertext" "bytea",
	"hook_key_version" integer,
	"last_sync_at" text COLLATE "C",
	"last_sync_status" text COLLATE "C",
	"last_error" text COLLATE "C",
	"sync_started_at" text COLLATE "C",
	"sync_owner" text COLLATE "C",
	"sync_heartbeat_at" text COLLATE "C",
	"pending" integer DEFAULT 0 NOT NULL,
	"last_run" text COLLATE "C",
	"last_deployment" text COLLATE "C",
	"connected_by" text COLLATE "C",
	"paused_at" text COLLATE "C",
	"paused_reason" text COLLATE "C",
	"created_at" text COLLATE "C" NOT NULL,
	"updated_at" text COLLATE "C" NOT NULL
);
--> statement-breakpoint
CREATE TABLE "invitations" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"project_id" text COLLATE "C" NOT NULL,
	"email" text COLLATE "C" NOT NULL,
	"role" text COLLATE "C" NOT NULL,
	"environments" text COLLATE "C" DEFAULT '[]' NOT NULL,
	"token_hash" text COLLATE "C" NOT NULL,
	"invited_by" text COLLATE "C",
	"created_at" text COLLATE "C" NOT NULL,
	"expires_at" text COLLATE "C" NOT NULL,
	"accepted_at" text COLLATE "C",
	"accepted_by" text COLLATE "C",
	"delivery_status" text COLLATE "C" DEFAULT 'not_configured' NOT NULL
);
--> statement-breakpoint
CREATE TABLE "key_checks" (
	"version" integer PRIMARY KEY NOT NULL,
	"check_value" text COLLATE "C" NOT NULL,
	"created_at" text COLLATE "C" NOT NULL
);
--> statement-breakpoint
CREATE TABLE "leases" (
	"name" text COLLATE "C" PRIMARY KEY NOT NULL,
	"owner" text COLLATE "C" NOT NULL,
	"heartbeat_at" text COLLATE "C" NOT NULL
);
--> statement-breakpoint
CREATE TABLE "memberships" (
	"project_id" text COLLATE "C" NOT NULL,
	"user_id" text COLLATE "C" NOT NULL,
	"role" text COLLATE "C" NOT NULL,
	"created_at" text COLLATE "C" NOT NULL,
	"updated_at" text COLLATE "C" NOT NULL,
	CONSTRAINT "memberships_project_id_user_id_pk" PRIMARY KEY("project_id","user_id")
);
--> statement-breakpoint
CREATE TABLE "project_environments" (
	"project_id" text COLLATE "C" NOT NULL,
	"slug" text COLLATE "C" NOT NULL,
	"created_at" text COLLATE "C" NOT NULL,
	CONSTRAINT "project_environments_project_id_slug_pk" PRIMARY KEY("project_id","slug")
);
--> statement-breakpoint
CREATE TABLE "project_keys" (
	"project_id" text COLLATE "C" NOT NULL,
	"key_version" integer NOT NULL,
	"wrapped_key" "bytea" NOT NULL,
	"created_at" text COLLATE "C" NOT NULL,
	CONSTRAINT "project_keys_project_id_key_version_pk" PRIMARY KEY("project_id","key_version")
);
--> statement-breakpoint
CREATE TABLE "projects" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"name" text COLLATE "C" NOT NULL,
	"description" text COLLATE "C",
	"created_by" text COLLATE "C",
	"created_at" text COLLATE "C" NOT NULL,
	"updated_at" text COLLATE "C" NOT NULL
);
--> statement-breakpoint
CREATE TABLE "rate_limit_windows" (
	"key" text COLLATE "C" PRIMARY KEY NOT NULL,
	"count" integer NOT NULL,
	"started_at" text COLLATE "C" NOT NULL,
	"expires_at" text COLLATE "C" NOT NULL
);
--> statement-breakpoint
CREATE TABLE "secret_versions" (
	"secret_id" text COLLATE "C" NOT NULL,
	"version_number" integer NOT NULL,
	"project_id" text COLLATE "C" NOT NULL,
	"key" text COLLATE "C" NOT NULL,
	"change_type" text COLLATE "C" NOT NULL,
	"restored_from_version" integer,
	"ciphertext" "bytea" NOT NULL,
	"key_version" integer NOT NULL,
	"digest" text COLLATE "C",
	"changed_by" text COLLATE "C",
	"changed_by_service_account_id" text COLLATE "C",
	"changed_by_service_account_name" text COLLATE "C",
	"created_at" text COLLATE "C" NOT NULL,
	CONSTRAINT "secret_versions_secret_id_version_number_pk" PRIMARY KEY("secret_id","version_number")
);
--> statement-breakpoint
CREATE TABLE "secrets" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"project_id" text COLLATE "C" NOT NULL,
	"environment" text COLLATE "C" NOT NULL,
	"key" text COLLATE "C" NOT NULL,
	"version" integer NOT NULL,
	"created_at" text COLLATE "C" NOT NULL,
	"updated_at" text COLLATE "C" NOT NULL
);
--> statement-breakpoint
CREATE TABLE "service_account_trusts" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"service_account_id" text COLLATE "C" NOT NULL,
	"issuer" text COLLATE "C" NOT NULL,
	"audience" text COLLATE "C" NOT NULL,
	"subject" text COLLATE "C" NOT NULL,
	"claims" text COLLATE "C" DEFAULT '{}' NOT NULL,
	"created_by" text COLLATE "C",
	"created_at" text COLLATE "C" NOT NULL,
	"last_audited_at" text COLLATE "C"
);
--> statement-breakpoint
CREATE TABLE "service_accounts" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"project_id" text COLLATE "C" NOT NULL,
	"name" text COLLATE "C" NOT NULL,
	"description" text COLLATE "C",
	"role" text COLLATE "C" NOT NULL,
	"environments" text COLLATE "C" NOT NULL,
	"created_by" text COLLATE "C",
	"created_at" text COLLATE "C" NOT NULL,
	"updated_at" text COLLATE "C" NOT NULL
);
--> statement-breakpoint
CREATE TABLE "service_tokens" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"service_account_id" text COLLATE "C" NOT NULL,
	"kind" text COLLATE "C" NOT NULL,
	"token_hash" text COLLATE "C" NOT NULL,
	"name" text COLLATE "C" NOT NULL,
	"allowed_cidrs" text COLLATE "C" DEFAULT '[]' NOT NULL,
	"trust_id" text COLLATE "C",
	"created_by" text COLLATE "C",
	"created_at" text COLLATE "C" NOT NULL,
	"expires_at" text COLLATE "C",
	"last_used_at" text COLLATE "C",
	"last_used_ip" text COLLATE "C"
);
--> statement-breakpoint
CREATE TABLE "sign_in_failures" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "sign_in_failures_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"account_hash" text COLLATE "C" NOT NULL,
	"address_hash" text COLLATE "C",
	"failed_at" text COLLATE "C" NOT NULL
);
--> statement-breakpoint
CREATE TABLE "users" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"email" text COLLATE "C",
	"email_verified" boolean DEFAULT false NOT NULL,
	"name" text COLLATE "C",
	"auth_issuer" text COLLATE "C" NOT NULL,
	"auth_subject" text COLLATE "C" NOT NULL,
	"password_hash" text COLLATE "C",
	"disabled_at" text COLLATE "C",
	"created_at" text COLLATE "C" NOT NULL,
	"updated_at" text COLLATE "C" NOT NULL
);
--> statement-breakpoint
ALTER TABLE "account_links" ADD CONSTRAINT "account_links_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "browser_sessions" ADD CONSTRAINT "browser_sessions_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "cli_sessions" ADD CONSTRAINT "cli_sessions_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "cli_tokens" ADD CONSTRAINT "cli_tokens_session_id_cli_sessions_id_fk" FOREIGN KEY ("session_id") REFERENCES "public"."cli_sessions"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "cli_device_requests" ADD CONSTRAINT "cli_device_requests_approved_by_users_id_fk" FOREIGN KEY ("approved_by") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "environment_grants" ADD CONSTRAINT "environment_grants_membership_fk" FOREIGN KEY ("project_id","user_id") REFERENCES "public"."memberships"("project_id","user_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "environment_grants" ADD CONSTRAINT "environment_grants_environment_fk" FOREIGN KEY ("project_id","environment") REFERENCES "public"."project_environments"("project_id","slug") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "integration_vars" ADD CONSTRAINT "integration_vars_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "integrations" ADD CONSTRAINT "integrations_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "invitations" ADD CONSTRAINT "invitations_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "memberships" ADD CONSTRAINT "memberships_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "memberships" ADD CONSTRAINT "memberships_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "project_environments" ADD CONSTRAINT "project_environments_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "project_keys" ADD CONSTRAINT "project_keys_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "projects" ADD CONSTRAINT "projects_created_by_users_id_fk" FOREIGN KEY ("created_by") REFERENCES "public"."users"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "secret_versions" ADD CONSTRAINT "secret_versions_secret_id_secrets_id_fk" FOREIGN KEY ("secret_id") REFERENCES "public"."secrets"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "secrets" ADD CONSTRAINT "secrets_environment_fk" FOREIGN KEY ("project_id","environment") REFERENCES "public"."project_environments"("project_id","slug") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "service_account_trusts" ADD CONSTRAINT "service_account_trusts_account_fk" FOREIGN KEY ("service_account_id") REFERENCES "public"."service_accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "service_accounts" ADD CONSTRAINT "service_accounts_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "service_tokens" ADD CONSTRAINT "service_tokens_service_account_id_service_accounts_id_fk" FOREIGN KEY ("service_account_id") REFERENCES "public"."service_accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "service_tokens" ADD CONSTRAINT "service_tokens_trust_id_service_account_trusts_id_fk" FOREIGN KEY ("trust_id") REFERENCES "public"."service_account_trusts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "account_links_token" ON "account_links" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "audit_events_project_at_seq" ON "audit_events" USING btree ("project_id","at","seq");--> statement-breakpoint
CREATE INDEX "audit_events_project_category_at_seq" ON "audit_events" USING btree ("project_id","category","at","seq");--> statement-breakpoint
CREATE INDEX "audit_events_project_action_at_seq" ON "audit_events" USING btree ("project_id","action","at","seq");--> statement-breakpoint
CREATE INDEX "audit_events_project_actor_at_seq" ON "audit_events" USING btree ("project_id","actor_user_id","at","seq");--> statement-breakpoint
CREATE INDEX "audit_events_project_actor_category_at_seq" ON "audit_events" USING btree ("project_id","actor_user_id","category","at","seq");--> statement-breakpoint
CREATE INDEX "audit_events_project_actor_action_at_seq" ON "audit_events" USING btree ("project_id","actor_user_id","action","at","seq");--> statement-breakpoint
CREATE INDEX "audit_events_project_service_account_at_seq" ON "audit_events" USING btree ("project_id","service_account_id","at","seq");--> statement-breakpoint
CREATE UNIQUE INDEX "browser_sessions_token" ON "browser_sessions" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "browser_sessions_user" ON "browser_sessions" USING btree ("user_id");--> statement-breakpoint
CREATE INDEX "cli_sessions_user" ON "cli_sessions" USING btree ("user_id");--> statement-breakpoint
CREATE UNIQUE INDEX "cli_tokens_hash" ON "cli_tokens" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "cli_tokens_session" ON "cli_tokens" USING btree ("session_id");--> statement-breakpoint
CREATE UNIQUE INDEX "cli_device_requests_device" ON "cli_device_requests" USING btree ("device_code_hash");--> statement-breakpoint
CREATE INDEX "cli_device_requests_user" ON "cli_device_requests" USING btree ("user_code_hash");--> statement-breakpoint
CREATE UNIQUE INDEX "invitations_token" ON "invitations" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "invitations_project" ON "invitations" USING btree ("project_id");--> statement-breakpoint
CREATE INDEX "invitations_email" ON "invitations" USING btree ("email");--> statement-breakpoint
CREATE INDEX "memberships_user" ON "memberships" USING btree ("user_id");--> statement-breakpoint
CREATE INDEX "projects_updated" ON "projects" USING btree ("updated_at");--> statement-breakpoint
CREATE INDEX "rate_limit_windows_expires" ON "rate_limit_windows" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "secret_versions_key_version" ON "secret_versions" USING btree ("key_version");--> statement-breakpoint
CREATE INDEX "secret_versions_project" ON "secret_versions" USING btree ("project_id");--> statement-breakpoint
CREATE UNIQUE INDEX "secrets_env_key" ON "secrets" USING btree ("project_id","environment","key");--> statement-breakpoint
CREATE INDEX "secrets_env_updated" ON "secrets" USING btree ("project_id","environment","updated_at");--> statement-breakpoint
CREATE INDEX "service_account_trusts_account" ON "service_account_trusts" USING btree ("service_account_id");--> statement-breakpoint
CREATE INDEX "service_accounts_project" ON "service_accounts" USING btree ("project_id");--> statement-breakpoint
CREATE UNIQUE INDEX "service_tokens_hash" ON "service_tokens" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "service_tokens_account" ON "service_tokens" USING btree ("service_account_id","kind");--> statement-breakpoint
CREATE INDEX "sign_in_failures_account" ON "sign_in_failures" USING btree ("account_hash","failed_at");--> statement-breakpoint
CREATE INDEX "sign_in_failures_pair" ON "sign_in_failures" USING btree ("account_hash","address_hash","failed_at");--> statement-breakpoint
CREATE INDEX "sign_in_failures_at" ON "sign_in_failures" USING btree ("failed_at");--> statement-breakpoint
CREATE UNIQUE INDEX "users_identity" ON "users" USING btree ("auth_issuer","auth_subject");--> statement-breakpoint
CREATE INDEX "users_email" ON "users" USING btree ("email");