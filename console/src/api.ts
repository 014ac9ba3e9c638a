// The server's public HTTP API, as the console uses it. Every call goes through `call`, which adds
// the bearer token and turns error bodies ({name, data: {message}}) into ApiError.
import { authHeaders } from "./auth";
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

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { ...authHeaders() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) onUnauthorized.handler();
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      const error = await response.json();
      message = error?.data?.message ?? error?.detail ?? message;
    } catch {
      // not JSON: keep the status line
    }
    throw new ApiError(response.status, message);
  }
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

const q = encodeURIComponent;

export const api = {
  health: () => call<{ healthy: boolean; version: string }>("GET", "/global/health"),
  sessions: (search?: string) =>
    call<Session[]>("GET", `/session${search ? `?search=${q(search)}` : ""}`),
  session: (id: string) => call<Session>("GET", `/session/${q(id)}`),
  status: () => call<Record<string, { type: string }>>("GET", "/session/status"),
  createSession: (body: { title?: string; metadata?: Record<string, unknown> }) =>
    call<Session>("POST", "/session", body),
  renameSession: (id: string, title: string) => call<Session>("PATCH", `/session/${q(id)}`, { title }),
  deleteSession: (id: string) => call<unknown>("DELETE", `/session/${q(id)}`),
  forkSession: (id: string) => call<Session>("POST", `/session/${q(id)}/fork`, {}),
  messages: (id: string, limit?: number) =>
    call<Message[]>("GET", `/session/${q(id)}/message${limit ? `?limit=${limit}` : ""}`),
  promptAsync: (id: string, body: PromptBody) => call<void>("POST", `/session/${q(id)}/prompt_async`, body),
  command: (id: string, body: { command: string; arguments: string; agent?: string; model?: string }) =>
    call<unknown>("POST", `/session/${q(id)}/command`, body),
  abort: (id: string) => call<unknown>("POST", `/session/${q(id)}/abort`),
  agents: () => call<AgentInfo[]>("GET", "/agent"),
  providers: () => call<{ all: Provider[]; connected?: string[]; default?: Record<string, string> }>("GET", "/provider"),
  commands: () => call<Command[]>("GET", "/command"),
  permissions: () => call<PermissionRequest[]>("GET", "/permission"),
  replyPermission: (id: string, reply: "once" | "always" | "reject", message?: string) =>
    call<unknown>("POST", `/permission/${q(id)}/reply`, message ? { reply, message } : { reply }),
  questions: () => call<Question[]>("GET", "/question"),
  replyQuestion: (id: string, answers: string[][]) => call<unknown>("POST", `/question/${q(id)}/reply`, { answers }),
  rejectQuestion: (id: string) => call<unknown>("POST", `/question/${q(id)}/reject`),
  audit: (after = 0) =>
    call<{ entries: AuditEntry[]; next: number | null }>("GET", `/audit?after=${after}&limit=500`),
};

export interface PromptBody {
  parts: Array<{ type: "text"; text: string } | { type: "file"; mime: string; filename: string; url: string }>;
  agent?: string;
  model?: { providerID: string; modelID: string };
}

export interface AuditEntry {
  seq: number;
  kind?: string;
  type?: string;
  actor?: string;
  time?: number | string;
  hash?: string;
  [key: string]: unknown;
}
