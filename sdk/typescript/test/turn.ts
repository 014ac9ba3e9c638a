// Drives one turn against a live server with the generated SDK (run by tests/sdk/test_typescript.py):
// subscribe, prompt, read the streamed text until the session is idle, then read the stored messages.
// Prints one JSON object for the test to check.
import { createAgentForgeClient, type Event } from "../src/index"

async function main(): Promise<void> {
  const forge = createAgentForgeClient({ baseUrl: process.env.FORGE_URL!, token: process.env.FORGE_TOKEN })
  const created = await forge.session.create({ body: { title: "from typescript" } })
  if (!created.data) throw new Error(`session.create: ${JSON.stringify(created.error)}`)
  const sessionID = created.data.id

  const controller = new AbortController()
  const { stream } = await forge.event.subscribe({ query: { sessionID }, signal: controller.signal })
  const types: string[] = []
  let streamed = ""
  const done = (async () => {
    for await (const event of stream as AsyncGenerator<Event>) {
      types.push(event.type)
      if (event.type === "server.connected") {
        const sent = await forge.session.promptAsync({
          path: { session_id: sessionID },
          body: { parts: [{ type: "text", text: "hello from node" }] },
        })
        if (sent.error) throw new Error(`session.promptAsync: ${JSON.stringify(sent.error)}`)
      }
      if (event.type === "message.part.delta") streamed += event.properties.delta
      if (event.type === "session.idle") break
    }
    controller.abort()
  })()
  await done

  const messages = await forge.session.messages({ path: { session_id: sessionID } })
  const missing = await forge.session.get({ path: { session_id: "ses_missing" } })
  console.log(
    JSON.stringify({
      sessionID,
      streamed,
      types,
      roles: (messages.data ?? []).map((m) => m.info.role),
      missing: { status: missing.response.status, name: missing.error?.name },
    }),
  )
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
