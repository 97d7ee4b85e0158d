// A tiny MCP server over stdio in plain JavaScript (no npm package): the sandbox tests
// lay it out as a built package, <package>/dist/index.js, beside dist/protocol.js and
// with node_modules/tiny-greeting, as `node /abs/path/dist/index.js` runs one.
import { createInterface } from "node:readline";
import { answer } from "./protocol.js";
import { greet } from "tiny-greeting";

const tools = {
  greet: {
    description: "Greets someone.",
    inputSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
    call: (args) => greet(args.name),
  },
};

createInterface({ input: process.stdin }).on("line", (line) => {
  if (!line.trim()) return;
  const reply = answer(JSON.parse(line), tools, "node-box");
  if (reply) process.stdout.write(JSON.stringify(reply) + "\n");
});
