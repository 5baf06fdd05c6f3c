// The PostgreSQL store's migrations: generated from src/core/schema.pg.ts (itself generated
// from src/core/schema.ts; `npm run db:generate:pg` runs both steps) into
// migrations/postgres/, beside SQLite's in migrations/ (drizzle.config.ts).
import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "postgresql",
  schema: "./src/core/schema.pg.ts",
  out: "./migrations/postgres",
});
