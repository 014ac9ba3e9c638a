// The Agent Forge TypeScript SDK: the client generated from sdk/openapi.json (src/gen), and a
// constructor that points it at a server with a credential.
import { createClient } from "./gen/client"
import { AgentForgeClient } from "./gen/sdk.gen"

export * from "./gen/types.gen"
export { AgentForgeClient } from "./gen/sdk.gen"
export type { Client, Config } from "./gen/client"

export interface AgentForgeOptions {
  /** The server, e.g. `http://127.0.0.1:4096`. */
  baseUrl: string
  /** An API key (`af_…`) or a JWT, sent as `Authorization: Bearer …`. */
  token?: string
  /** Another fetch (tests, proxies). */
  fetch?: typeof fetch
  headers?: Record<string, string>
}

/** A client whose methods nest by operationId: `forge.session.create()`, `forge.event.subscribe()`. */
export function createAgentForgeClient(options: AgentForgeOptions): AgentForgeClient {
  const client = createClient({
    baseUrl: options.baseUrl,
    fetch: options.fetch,
    headers: options.headers,
    auth: options.token,
  })
  return new AgentForgeClient({ client })
}
