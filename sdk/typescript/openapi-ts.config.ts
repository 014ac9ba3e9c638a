import { defineConfig } from "@hey-api/openapi-ts"

// Regenerate with `python scripts/export_openapi.py` (exports ../openapi.json, then runs this).
// Operations nest by their operationId: `session.prompt` -> `client.session.prompt()`.
export default defineConfig({
  input: "../openapi.json",
  output: { path: "src/gen", clean: true },
  plugins: [
    "@hey-api/typescript",
    { name: "@hey-api/sdk", operations: { strategy: "single", containerName: "AgentForgeClient" } },
    "@hey-api/client-fetch",
  ],
})
