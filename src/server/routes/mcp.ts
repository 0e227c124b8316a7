/**
 * `POST /mcp`: the remote tool endpoint (spec: "Remote tool endpoint"; DESIGN §6). MCP Streamable
 * HTTP, stateless: a new McpServer and transport per request, JSON responses, never a session id.
 *
 * Before any MCP processing, in this order: `Host` and `Origin` (403), the flood limit (429 with
 * Retry-After), and the credential (an `Authorization` header that is present must be valid: 401,
 * never a silent fall back to the anonymous lane). `GET` and `DELETE` answer 405 with `Allow: POST`.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { addressKey } from '#vidsheet/core/client-address.js';
import { remoteErrors, type VidsheetError } from '#vidsheet/core/errors.js';
import { excerpt } from '#vidsheet/core/redact.js';
import { type RemoteInput, toolDefinition } from '#vidsheet/mcp/tool.js';
import { callerGone } from '../hosted/caller-gone.js';
import { requireJsonBody } from '../plugins/early-answer.js';
import { callRemoteTool, type RemoteParts } from '../remote/tool.js';

const refuse = (reply: FastifyReply, error: VidsheetError) => reply.code(error.status).send(error.body());

/** Requests per client and minute, in fixed windows (per instance: a flood guard, not a quota). */
function floodGuard(perMinute: number) {
  const windows = new Map<string, { start: number; count: number }>();
  return (client: string, now: number): number | undefined => {
    const minute = Math.floor(now / 60_000) * 60_000;
    // Old windows go at each new minute, so the map holds one minute of clients at most.
    for (const [key, w] of windows) if (w.start !== minute) windows.delete(key);
    const w = windows.get(client) ?? { start: minute, count: 0 };
    w.count++;
    windows.set(client, w);
    return w.count > perMinute ? Math.ceil((minute + 60_000 - now) / 1000) : undefined;
  };
}

export async function mcpRoutes(
  app: FastifyInstance,
  deps: RemoteParts & { version: string },
): Promise<void> {
  const { config } = deps;
  const hosts = new Set(config.allowedHosts.map((h) => h.toLowerCase()));
  const origins = new Set(config.allowedOrigins.map((o) => o.toLowerCase()));
  const flooded = floodGuard(config.mcpFloodPerMin);

  app.addHook('onRequest', async (request, reply) => {
    if (!hosts.has(String(request.headers.host ?? '').toLowerCase())) {
      return refuse(reply, remoteErrors.forbidden('Host'));
    }
    const origin = request.headers.origin;
    if (origin !== undefined && !origins.has(origin.toLowerCase())) {
      return refuse(reply, remoteErrors.forbidden('Origin'));
    }
    const retryAfter = flooded(addressKey(request.ip), Date.now());
    if (retryAfter !== undefined) {
      return refuse(reply.header('retry-after', String(retryAfter)), remoteErrors.rateLimited(retryAfter));
    }
  });

  const notAllowed = async (_request: FastifyRequest, reply: FastifyReply) =>
    refuse(reply.header('allow', 'POST'), remoteErrors.methodNotAllowed());
  // Answered before any body is read: a body these methods carry is never parsed (or refused).
  app.get('/mcp', { schema: { hide: true }, onRequest: notAllowed }, notAllowed);
  app.delete('/mcp', { schema: { hide: true }, onRequest: notAllowed }, notAllowed);

  // A body that is not JSON gets the zoom's `415` (the catalog's shape, like this route's 403 and 405).
  const onRequest = [app.keyIfPresent, requireJsonBody];
  app.post('/mcp', { schema: { hide: true }, onRequest }, async (request, reply) => {
    // The caller's connection closing before its answer stops its fetch (remote/tool.ts).
    const gone = callerGone(reply.raw);
    const caller = { account: request.account, ip: request.ip, log: request.log, gone };
    // From here the transport writes the response itself.
    reply.hijack();
    const server = new McpServer({ name: 'vidsheet', version: deps.version });
    const tool = toolDefinition({ source: 'url' });
    server.registerTool(tool.name, tool, (args: RemoteInput, extra) =>
      callRemoteTool(args, extra._meta as Record<string, unknown> | undefined, caller, deps),
    );
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    reply.raw.on('close', () => {
      void transport.close();
      void server.close();
    });
    try {
      quoteUnknownTools(request.body, tool.name);
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, request.body);
    } catch (error) {
      request.log.error({ err: error }, 'mcp request failed');
      if (!reply.raw.headersSent) {
        reply.raw.writeHead(500, { 'content-type': 'application/json' });
        reply.raw.end(
          JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'internal error' }, id: null }),
        );
      }
    }
  });
}

/**
 * DESIGN §5a: no input is echoed whole. The SDK's answer to a call of an unknown tool names the tool
 * as it was sent, so such a name is cut to 64 characters (core/redact.ts) before the SDK sees it.
 */
function quoteUnknownTools(body: unknown, known: string): void {
  for (const message of Array.isArray(body) ? body : [body]) {
    const call = message as { method?: unknown; params?: { name?: unknown } } | null;
    const params = call?.method === 'tools/call' ? call.params : undefined;
    if (params && typeof params.name === 'string' && params.name !== known)
      params.name = excerpt(params.name);
  }
}
