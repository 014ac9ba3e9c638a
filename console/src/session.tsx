// One session: its transcript, live from the page's event stream (hub.ts), and the composer. The
// view listens before it reads the session's messages, so no event of a turn is missed.
import { memo } from "preact/compat";
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "./api";
import { Composer } from "./composer";
import type { EventHub } from "./hub";
import { cost } from "./format";
import { PartView } from "./parts";
import { PermissionCard, QuestionCard } from "./pending";
import { Transcript } from "./transcript";
import type { Command, Message, PermissionRequest, Question, ServerEvent, Session } from "./types";
import { VirtualList } from "./virtual";

const PAGE = 200;

interface Props {
  session: Session;
  busy: boolean;
  retrying: string | null; // the provider failed and the turn waits to retry
  commands: Command[];
  permissions: PermissionRequest[];
  questions: Question[];
  hub: EventHub; // this session's events, from the page's one stream
  link: "connecting" | "live" | "offline";
}

export function SessionView({ session, busy, retrying, commands, permissions, questions, hub, link }: Props) {
  const transcript = useRef<Transcript | null>(null);
  const [messages, setMessages] = useState<Message[]>([]);
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<string | null>(null);
  const [loaded, setLoaded] = useState(false);
  const [older, setOlder] = useState<string | null>(null); // cursor of the page before the first shown
  const [loadingOlder, setLoadingOlder] = useState(false);

  useEffect(() => {
    let cancelled = false;
    let frame = 0;
    let queued: ServerEvent[] | null = []; // heard while the page loads, applied after it
    transcript.current = null;
    setMessages([]);
    setLoaded(false);
    setError(null);
    // Many deltas a second: re-render at most once per animation frame.
    const flush = () => {
      frame = 0;
      const t = transcript.current;
      if (t) {
        setMessages(t.messages());
        setVersion(t.version);
      }
    };
    const apply = (event: ServerEvent) => {
      if (event.type === "session.error" && event.properties.error) {
        const e = event.properties.error;
        if (e.name !== "MessageAbortedError") setError(e.data?.message ?? e.name ?? "error");
      }
      if (event.type === "stream.reset") reload();
      else if (transcript.current?.apply(event) && !frame) frame = requestAnimationFrame(flush);
    };
    // The latest page first: a long session opens as fast as a short one; older pages on demand.
    const load = async () => {
      const page = await api.messages(session.id, PAGE);
      if (cancelled) return;
      const heard = queued ?? [];
      if (heard.some((event) => event.type === "stream.reset")) return reload(); // read again
      const t = new Transcript(page.messages);
      transcript.current = t;
      // Events heard meanwhile, in order: updates replace, and deltas continue only parts the
      // stream itself started or replaced, so nothing the page already held is added twice.
      for (const event of heard) t.apply(event);
      queued = null;
      setOlder(page.next);
      flush();
      setLoaded(true);
      if (t.waitingForSnapshot) hub.resync();
    };
    // The server no longer holds the stream's point: read the page again, queueing events meanwhile.
    const reload = (): Promise<void> => {
      queued = [];
      return load().catch((e) => void (!cancelled && setError(String(e.message ?? e))));
    };
    // Listening before the page is read: no event after it is missed.
    const stop = hub.listen(session.id, (event) => (queued ? queued.push(event) : apply(event)));
    void reload();
    return () => {
      cancelled = true;
      stop();
      if (frame) cancelAnimationFrame(frame);
    };
  }, [session.id]);

  const loadOlder = async () => {
    if (!older || loadingOlder) return;
    setLoadingOlder(true);
    try {
      const page = await api.messages(session.id, PAGE, older);
      transcript.current?.addOlder(page.messages);
      setOlder(page.next);
      const t = transcript.current;
      if (t) {
        setMessages(t.messages());
        setVersion(t.version);
      }
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      setLoadingOlder(false);
    }
  };

  const send = async (text: string, files: Array<{ type: "file"; mime: string; filename: string; url: string }>) => {
    setError(null);
    const parts = [...(text ? [{ type: "text" as const, text }] : []), ...files];
    const chosen = session.metadata ?? {};
    await api.promptAsync(session.id, {
      parts,
      ...(chosen.agent ? { agent: chosen.agent } : {}),
      ...(chosen.model ? { model: chosen.model } : {}),
    });
  };
  const command = async (name: string, args: string) => {
    setError(null);
    const agent = session.metadata?.agent;
    void api.command(session.id, { command: name, arguments: args, ...(agent ? { agent } : {}) }).catch((e) => setError(String(e.message ?? e)));
  };
  const stop = () => void api.abort(session.id).catch((e) => setError(String(e.message ?? e)));

  return (
    <div class="session">
      <header class="session-head">
        <h2>{session.title}</h2>
        <span class="meta">
          {cost(session.cost)} · <span class={`link-state link-${link}`}>{link}</span>
          {busy && <span class="badge badge-running">busy</span>}
        </span>
      </header>
      {loaded ? (
        <VirtualList
          items={messages}
          keyOf={(m) => m.info.id}
          version={version}
          label="Transcript"
          render={(m) => <MessageView message={m} />}
          header={
            older ? (
              <button type="button" class="link load-older" onClick={() => void loadOlder()} disabled={loadingOlder}>
                Load earlier messages
              </button>
            ) : null
          }
        />
      ) : (
        <div class="scroller" aria-busy="true">
          Loading…
        </div>
      )}
      <div class="pending-inline">
        {permissions.map((p) => (
          <PermissionCard key={p.id} request={p} />
        ))}
        {questions.map((q) => (
          <QuestionCard key={q.id} question={q} />
        ))}
      </div>
      {retrying && (
        <p class="retry" role="status">
          {retrying}
        </p>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <Composer busy={busy} commands={commands} onSend={send} onCommand={command} onStop={stop} />
    </div>
  );
}

// Re-rendered only when its message changed (Transcript keeps unchanged Message objects).
const MessageView = memo(function MessageView({ message }: { message: Message }) {
  const { info, parts } = message;
  return (
    <article class={`message message-${info.role}`} aria-label={info.role === "user" ? "You" : "Assistant"}>
      <div class="who">
        {info.role === "user" ? "You" : info.agent ?? "assistant"}
        {info.role === "assistant" && info.modelID ? <span class="meta"> · {info.modelID}</span> : null}
      </div>
      {parts.map((part) => (
        <PartView key={part.id} part={part} />
      ))}
      {info.error && info.error.name !== "MessageAbortedError" && (
        <p class="error">{info.error.data?.message ?? info.error.name}</p>
      )}
      {info.error?.name === "MessageAbortedError" && <p class="meta">Stopped</p>}
    </article>
  );
})
