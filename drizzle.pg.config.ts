// The PostgreSQL store's migrations (issue 13): generated from src/core/schema.pg.ts into
// migrations/postgres/, beside SQLite's in migrations/ (drizzle.config.ts).
import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "postgresql",
  schema: "./src/core/schema.pg.ts",
  out: "./migrations/postgres",
});
