// The wire shapes the console reads (a subset of the OpenAPI schemas; unknown fields are ignored).
export interface Session {
  id: string;
  title: string;
  parentID?: string | null;
  directory: string;
  time: { created: number; updated: number };
  cost?: number;
  agent?: string | null;
  model?: { id: string; providerID: string } | null;
  metadata?: { agent?: string; model?: { providerID: string; modelID: string } } | null;
}

export interface MessageInfo {
  id: string;
  sessionID: string;
  role: "user" | "assistant";
  time: { created: number; completed?: number | null };
  agent?: string;
  modelID?: string;
  providerID?: string;
  cost?: number;
  tokens?: Tokens;
  error?: { name: string; data?: { message?: string } } | null;
}

export interface Tokens {
  input: number;
  output: number;
  reasoning: number;
  cache?: { read: number; write: number };
}

export interface ToolState {
  status: "pending" | "running" | "completed" | "error";
  input?: Record<string, unknown>;
  output?: string;
  title?: string;
  error?: string;
  metadata?: Record<string, unknown> | null;
}

export interface Part {
  id: string;
  sessionID: string;
  messageID: string;
  type: string;
  text?: string;
  tool?: string;
  callID?: string;
  state?: ToolState;
  reason?: string;
  cost?: number;
  tokens?: Tokens;
  attempt?: number;
  error?: { name?: string; data?: { message?: string }; message?: string };
  mime?: string;
  filename?: string;
  url?: string;
  files?: string[];
  synthetic?: boolean | null;
  time?: { start?: number; end?: number | null } | null;
}

export interface Message {
  info: MessageInfo;
  parts: Part[];
}

export interface AgentInfo {
  name: string;
  mode?: string;
  hidden?: boolean;
  description?: string;
}

export interface Provider {
  id: string;
  name?: string;
  models: Record<string, { id: string; name?: string }>;
}

export interface Command {
  name: string;
  description?: string;
}

export interface PermissionRequest {
  id: string;
  sessionID: string;
  permission: string;
  patterns: string[];
  metadata?: Record<string, unknown>;
  tool?: { messageID: string; callID: string } | null;
}

export interface QuestionOption {
  label: string;
  description?: string;
}

export interface QuestionItem {
  question: string;
  header?: string;
  options?: QuestionOption[];
  multiple?: boolean;
}

export interface Question {
  id: string;
  sessionID: string;
  questions: QuestionItem[];
}

export interface ServerEvent {
  id: string | null; // the frame's own SSE id: the tenant position of durable events
  type: string;
  properties: Record<string, any>;
}
