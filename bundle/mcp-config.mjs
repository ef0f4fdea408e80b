// The command line Claude Desktop would start the bundle's server with,
// computed by the mcpb library's own getMcpConfigForManifest.
// Usage: node mcp-config.mjs MCPB_PACKAGE_DIR MANIFEST EXTENSION_DIR USER_CONFIG_JSON
// Prints {"command": ..., "args": [...]} as JSON.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [pkg, manifestPath, extensionPath, userConfig] = process.argv.slice(2);
const mcpb = await import(pathToFileURL(join(pkg, "dist", "index.js")).href);
const config = await mcpb.getMcpConfigForManifest({
  manifest: JSON.parse(readFileSync(manifestPath, "utf8")),
  extensionPath,
  systemDirs: {},
  userConfig: JSON.parse(userConfig),
  pathSeparator: "/",
});
process.stdout.write(JSON.stringify({ command: config.command, args: config.args }));
