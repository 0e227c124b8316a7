/**
 * The local tool server (`vidsheet mcp`) spawned as an MCP client runs it and driven with the SDK's
 * own client over stdio.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { BIN } from './cli.js';

/** This process's environment, with `engine` and `env` added: what a `vidsheet mcp` is started with. */
export function mcpEnv(engine: string, env: Record<string, string> = {}): Record<string, string> {
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) base[k] = v;
  return { ...base, VIDSHEET_ENGINE: engine, ...env };
}

/**
 * Connects a client to a new `vidsheet mcp` on `engine`; `env` adds to this process's environment.
 * The server's stderr is collected (its stdout carries the protocol frames only).
 */
export async function connectMcp(
  engine: string,
  env: Record<string, string> = {},
): Promise<{ client: Client; stderr: () => string }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp'],
    env: mcpEnv(engine, env),
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d) => (stderr += d));
  const client = new Client({ name: 'vidsheet-test', version: '0' });
  await client.connect(transport);
  return { client, stderr: () => stderr };
}
