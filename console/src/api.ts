// The server's public API as the console uses it: every call goes through the TypeScript SDK
// generated from the server's OpenAPI contract (sdk/typescript). The SDK sends the API key as a
// bearer token; `unwrap` turns its error results ({name, data: {message}}) into ApiError.
import { createAgentForgeClient, type AgentForgeClient } from "@agentforge/sdk";
import { apiKey } from "./auth";
import type { AgentInfo, Command, Message, PermissionRequest, Provider, Question, Session } from "./types";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export const onUnauthorized: { handler: () => void } = { handler: () => {} };

let current: { key: string | null; client: AgentForgeClient } | null = null;

/** The SDK client for the key signed in with now (a new one after signing in or out). */
export function sdk(): AgentForgeClient {
  const key = apiKey();
  if (current === null || current.key !== key) {
    // The bearer header is set here rather than through the SDK's `token`: the generated client
    // applies every security scheme the spec lists in turn, and the last (basic) would win.
    const headers: Record<string, string> = key ? { Authorization: `Bearer ${key}` } : {};
    current = { key, client: createAgentForgeClient({ baseUrl: location.origin, headers }) };
  }
  return current.client;
}

interface Result {
  data?: unknown;
  error?: unknown;
  response?: Response;
}

async function unwrap<T>(call: Promise<Result>): Promise<T> {
  return (await unwrapWithResponse<T>(call)).data;
}

async function unwrapWithResponse<T>(call: Promise<Result>): Promise<{ data: T; response: Response }> {
  const { data, error, response } = await call;
  const status = response?.status ?? 0;
  if (status === 401) onUnauthorized.handler();
  if (error !== undefined || !response?.ok) {
    const body = error as { data?: { message?: string }; detail?: string } | undefined;
    throw new ApiError(status, body?.data?.message ?? body?.detail ?? `${status} ${response?.statusText ?? "no answer"}`);
  }
  return { data: data as T, response };
}

const session = (id: string) => ({ path: { session_id: id } });
const request = (id: string) => ({ path: { request_id: id } });

export const api = {
  sessions: () => unwrap<Session[]>(sdk().session.list()),
  status: () => unwrap<Record<string, { type: string }>>(sdk().session.status()),
  createSession: (body: { title?: string; metadata?: Record<string, unknown> }) =>
    unwrap<Session>(sdk().session.create({ body })),
  renameSession: (id: string, title: string) => unwrap<Session>(sdk().session.update({ ...session(id), body: { title } })),
  deleteSession: (id: string) => unwrap<unknown>(sdk().session.delete(session(id))),
  forkSession: (id: string) => unwrap<Session>(sdk().session.fork({ ...session(id), body: {} })),
  /** The latest `limit` messages before `before` (all of them when older ones remain: `next`). */
  messages: async (id: string, limit: number, before?: string) => {
    const query = before ? { limit, before } : { limit };
    const { data, response } = await unwrapWithResponse<Message[]>(sdk().session.messages({ ...session(id), query }));
    return { messages: data, next: response.headers.get("X-Next-Cursor") };
  },
  promptAsync: (id: string, body: PromptBody) =>
    unwrap<void>(sdk().session.promptAsync({ ...session(id), body })),
  command: (id: string, body: { command: string; arguments: string; agent?: string }) =>
    unwrap<unknown>(sdk().session.command({ ...session(id), body })),
  abort: (id: string) => unwrap<unknown>(sdk().session.abort(session(id))),
  agents: () => unwrap<AgentInfo[]>(sdk().app.agents()),
  providers: () => unwrap<{ all: Provider[] }>(sdk().provider.list()),
  commands: () => unwrap<Command[]>(sdk().command.list()),
  permissions: () => unwrap<PermissionRequest[]>(sdk().permission.list()),
  replyPermission: (id: string, reply: "once" | "always" | "reject", message?: string) =>
    unwrap<unknown>(sdk().permission.reply({ ...request(id), body: message ? { reply, message } : { reply } })),
  questions: () => unwrap<Question[]>(sdk().question.list()),
  replyQuestion: (id: string, answers: string[][]) =>
    unwrap<unknown>(sdk().question.reply({ ...request(id), body: { answers } })),
  rejectQuestion: (id: string) => unwrap<unknown>(sdk().question.reject(request(id))),
  audit: (after = 0) =>
    unwrap<{ entries: AuditEntry[]; next: number | null }>(sdk().audit.list({ query: { after, limit: 500 } })),
};

export interface PromptBody {
  parts: Array<{ type: "text"; text: string } | { type: "file"; mime: string; filename: string; url: string }>;
  agent?: string;
  model?: { providerID: string; modelID: string };
}

export interface AuditEntry {
  seq: number;
  [key: string]: unknown;
}
