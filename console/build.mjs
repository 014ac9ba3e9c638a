// Builds the console into src/agentforge/console/ (committed: the server serves it, nothing is built
// at install). Deterministic: the same sources and lock give the same bytes, which CI checks.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
// CONSOLE_OUT: build elsewhere (the test that compares a fresh build with the committed one).
const out = process.env.CONSOLE_OUT ?? join(here, "..", "src", "agentforge", "console");
mkdirSync(out, { recursive: true });

await build({
  entryPoints: [join(here, "src", "app.tsx")],
  bundle: true,
  minify: process.env.CONSOLE_DEBUG !== "1",
  format: "esm",
  target: "es2022",
  jsx: "automatic",
  jsxImportSource: "preact",
  legalComments: "none", // the licences go in LICENSES.txt
  charset: "utf8",
  outfile: join(out, "app.js"),
  // The console talks to the server only through the SDK generated from the OpenAPI contract.
  alias: { "@agentforge/sdk": join(here, "..", "sdk", "typescript", "src", "index.ts") },
});

copyFileSync(join(here, "src", "index.html"), join(out, "index.html"));
const styles = join(here, "node_modules", "highlight.js", "styles");
const css = [
  readFileSync(join(here, "src", "app.css"), "utf8"),
  readFileSync(join(styles, "github.css"), "utf8"),
  `@media (prefers-color-scheme: dark) {\n${readFileSync(join(styles, "github-dark.css"), "utf8")}\n}`,
];
writeFileSync(join(out, "app.css"), css.join("\n"));

// The licences of what the bundle contains.
const vendored = ["preact", "marked", "dompurify", "highlight.js"];
const licences = vendored.map((name) => {
  const pkg = JSON.parse(readFileSync(join(here, "node_modules", name, "package.json"), "utf8"));
  const text = readFileSync(join(here, "node_modules", name, "LICENSE"), "utf8");
  return `${name} ${pkg.version} (${pkg.license})\n${"=".repeat(60)}\n${text.trim()}\n`;
});
writeFileSync(join(out, "LICENSES.txt"), licences.join("\n\n"));
