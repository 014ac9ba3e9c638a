// The console's shell: sign-in, the session list (a tree of parents and subagent children), the
// pending-requests indicator, and the selected session or the audit log.
import { render } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import { api, ApiError, onUnauthorized } from "./api";
import { apiKey, signIn, signOut } from "./auth";
import { AuditView } from "./audit";
import { EventStream } from "./events";
import { EventHub } from "./hub";
import { ago, cost } from "./format";
import { SessionView } from "./session";
import type { AgentInfo, Command, PermissionRequest, Provider, Question, ServerEvent, Session } from "./types";

type Phase = "loading" | "signin" | "ready";

/** Per id, the number of the last change heard, for a list that is also read again in whole. */
class Heard {
  private count = 0;
  private readonly at = new Map<string, number>();

  hear(id: string): void {
    this.at.set(id, ++this.count);
  }

  /** Where a read asked now stands. */
  mark(): number {
    return this.count;
  }

  since(id: string, mark: number): boolean {
    return (this.at.get(id) ?? 0) > mark;
  }

  /** `read` (asked at `mark`), with what `current` holds of the ids heard since instead. */
  merge<T extends { id: string }>(current: T[], read: T[], mark: number): T[] {
    return [...read.filter((t) => !this.since(t.id, mark)), ...current.filter((t) => this.since(t.id, mark))];
  }
}

function App() {
  const [phase, setPhase] = useState<Phase>("loading");
  const [sessions, setSessions] = useState<Session[]>([]);
  const [busy, setBusy] = useState<Record<string, boolean>>({});
  const [retrying, setRetrying] = useState<Record<string, string | null>>({});
  const [permissions, setPermissions] = useState<PermissionRequest[]>([]);
  const [questions, setQuestions] = useState<Question[]>([]);
  const [commands, setCommands] = useState<Command[]>([]);
  const [selected, setSelected] = useState<string | null>(() => location.hash.slice(1) || null);
  const [view, setView] = useState<"session" | "new" | "audit">("session");
  const [search, setSearch] = useState("");
  const [menuOpen, setMenuOpen] = useState(false);
  const [signInError, setSignInError] = useState<string | null>(null);
  const [link, setLink] = useState<"connecting" | "live" | "offline">("connecting");
  const hub = useMemo(() => new EventHub(), []);

  onUnauthorized.handler = () => setPhase("signin");

  // What was heard per list (an event, or a change made here): a refresh asked before it keeps that
  // over its older answer, which would drop a session or a request made while it was on its way, or
  // bring back one answered or deleted meanwhile.
  const heard = useMemo(
    () => ({ status: new Heard(), sessions: new Heard(), permissions: new Heard(), questions: new Heard() }),
    [],
  );

  const refresh = async () => {
    const asked = {
      status: heard.status.mark(),
      sessions: heard.sessions.mark(),
      permissions: heard.permissions.mark(),
      questions: heard.questions.mark(),
    };
    const [list, status, perms, qs] = await Promise.all([
      api.sessions(),
      api.status(),
      api.permissions(),
      api.questions(),
    ]);
    setSessions((current) =>
      heard.sessions.merge(current, list, asked.sessions).sort((a, b) => b.time.updated - a.time.updated),
    );
    const fresh = ([id]: [string, unknown]) => !heard.status.since(id, asked.status);
    const read = Object.entries(status).filter(fresh);
    setBusy((all) => ({
      ...Object.fromEntries(Object.entries(all).filter((entry) => !fresh(entry))),
      ...Object.fromEntries(read.map(([id, s]) => [id, s.type !== "idle"])),
    }));
    setPermissions((current) => heard.permissions.merge(current, perms, asked.permissions));
    setQuestions((current) => heard.questions.merge(current, qs, asked.questions));
  };

  const start = async () => {
    try {
      await refresh();
      setPhase("ready");
      setSignInError(null);
      api.commands().then(setCommands, () => setCommands([]));
    } catch (e) {
      if (e instanceof ApiError && (e.status === 401 || e.status === 403)) {
        if (apiKey()) setSignInError("That key was not accepted.");
        signOut();
        setPhase("signin");
      } else setSignInError(String(e));
    }
  };

  useEffect(() => void start(), []);

  useEffect(() => {
    if (phase !== "ready") return;
    // The page's one event stream keeps the list, the busy flags and the pending requests current
    // and feeds the open session's transcript. Busy flags are not in the log: read them again on
    // every (re)connect.
    const stream = new EventStream({
      onEvent: (event) => {
        applyGlobal(event);
        hub.dispatch(event);
      },
      onState: (state) => {
        setLink(state);
        if (state === "live") void refresh().catch(() => {});
      },
      onUnauthorized: () => setPhase("signin"),
    });
    hub.stream = stream;
    stream.start();
    return () => {
      hub.stream = null;
      stream.close();
    };
  }, [phase]);

  useEffect(() => {
    if (selected) history.replaceState(null, "", `#${selected}`);
  }, [selected]);

  const applyGlobal = (event: ServerEvent) => {
    const p = event.properties;
    switch (event.type) {
      case "session.created":
      case "session.updated": {
        const info = p.info as Session;
        heard.sessions.hear(info.id);
        setSessions((all) => [info, ...all.filter((s) => s.id !== info.id)].sort((a, b) => b.time.updated - a.time.updated));
        break;
      }
      case "stream.reset": // the server no longer holds the stream's point
        void refresh().catch(() => {});
        break;
      case "session.deleted":
        heard.sessions.hear(p.info?.id ?? p.sessionID);
        setSessions((all) => all.filter((s) => s.id !== (p.info?.id ?? p.sessionID)));
        break;
      case "session.status":
        heard.status.hear(p.sessionID);
        setBusy((all) => ({ ...all, [p.sessionID]: p.status?.type !== "idle" }));
        setRetrying((all) => ({
          ...all,
          [p.sessionID]: p.status?.type === "retry" ? `Retrying (attempt ${p.status.attempt}): ${p.status.message}` : null,
        }));
        break;
      case "session.idle":
        heard.status.hear(p.sessionID);
        setBusy((all) => ({ ...all, [p.sessionID]: false }));
        break;
      case "permission.asked":
        heard.permissions.hear(p.id);
        setPermissions((all) => [...all.filter((r) => r.id !== p.id), p as PermissionRequest]);
        break;
      case "permission.replied":
        heard.permissions.hear(p.requestID ?? p.id);
        setPermissions((all) => all.filter((r) => r.id !== (p.requestID ?? p.id)));
        break;
      case "question.asked":
        heard.questions.hear(p.id);
        setQuestions((all) => [...all.filter((q) => q.id !== p.id), p as Question]);
        break;
      case "question.replied":
      case "question.rejected":
        heard.questions.hear(p.requestID ?? p.id);
        setQuestions((all) => all.filter((q) => q.id !== (p.requestID ?? p.id)));
        break;
    }
  };

  if (phase === "loading") return <main class="center">Loading…</main>;
  if (phase === "signin")
    return (
      <SignIn
        error={signInError}
        onKey={(key) => {
          signIn(key);
          setPhase("loading");
          void start();
        }}
      />
    );

  const session = sessions.find((s) => s.id === selected) ?? null;
  const pendingCount = permissions.length + questions.length;
  const pendingSessions = new Set([...permissions, ...questions].map((r) => r.sessionID));
  const choose = (id: string) => {
    setSelected(id);
    setView("session");
    setMenuOpen(false);
  };

  return (
    <div class={`shell ${menuOpen ? "menu-open" : ""}`}>
      <header class="topbar">
        <button type="button" class="menu-toggle" aria-label="Sessions" aria-expanded={menuOpen} onClick={() => setMenuOpen(!menuOpen)}>
          ☰
        </button>
        <h1>Agent Forge</h1>
        {pendingCount > 0 ? (
          <button
            type="button"
            class="pending-indicator"
            aria-label={`${pendingCount} pending request${pendingCount === 1 ? "" : "s"}`}
            onClick={() => {
              const first = [...permissions, ...questions][0];
              if (first) choose(first.sessionID);
            }}
          >
            {pendingCount} pending
          </button>
        ) : null}
        <nav class="top-actions">
          <button type="button" class="link" onClick={() => setView("audit")}>
            Audit
          </button>
          {apiKey() && (
            <button
              type="button"
              class="link"
              onClick={() => {
                signOut();
                setPhase("signin");
              }}
            >
              Sign out
            </button>
          )}
        </nav>
      </header>
      <aside class="sidebar" aria-label="Sessions">
        <button type="button" class="primary wide" onClick={() => (setView("new"), setMenuOpen(false))}>
          New session
        </button>
        <input
          type="search"
          aria-label="Search sessions"
          placeholder="Search sessions"
          value={search}
          onInput={(e) => setSearch(e.currentTarget.value)}
        />
        <SessionTree
          sessions={sessions}
          search={search}
          selected={selected}
          busy={busy}
          pending={pendingSessions}
          onChoose={choose}
        />
      </aside>
      <main class="main">
        {view === "audit" ? (
          <AuditView />
        ) : view === "new" ? (
          <NewSession
            onCreated={(s) => (heard.sessions.hear(s.id), setSessions((all) => [s, ...all.filter((x) => x.id !== s.id)]), choose(s.id))}
          />
        ) : session ? (
          <>
            <SessionActions session={session} onChanged={() => void refresh()} onForked={choose} onDeleted={() => setSelected(null)} />
            <SessionView
              key={session.id}
              session={session}
              busy={!!busy[session.id]}
              retrying={retrying[session.id] ?? null}
              commands={commands}
              permissions={permissions.filter((p) => p.sessionID === session.id)}
              questions={questions.filter((q) => q.sessionID === session.id)}
              hub={hub}
              link={link}
            />
          </>
        ) : (
          <div class="center">
            <p>Pick a session or start a new one.</p>
          </div>
        )}
      </main>
    </div>
  );
}

function SessionTree(props: {
  sessions: Session[];
  search: string;
  selected: string | null;
  busy: Record<string, boolean>;
  pending: Set<string>;
  onChoose: (id: string) => void;
}) {
  const { sessions, search } = props;
  const children = useMemo(() => {
    const map = new Map<string | null, Session[]>();
    const ids = new Set(sessions.map((s) => s.id));
    for (const s of sessions) {
      const parent = s.parentID && ids.has(s.parentID) ? s.parentID : null;
      map.set(parent, [...(map.get(parent) ?? []), s]);
    }
    return map;
  }, [sessions]);
  const needle = search.trim().toLowerCase();
  if (needle) {
    const found = sessions.filter((s) => s.title.toLowerCase().includes(needle) || s.id.includes(needle));
    return <ul class="tree">{found.map((s) => <SessionItem key={s.id} s={s} {...props} />)}</ul>;
  }
  const branch = (parent: string | null): preact.JSX.Element => (
    <ul class="tree" role={parent ? "group" : undefined}>
      {(children.get(parent) ?? []).map((s) => (
        <SessionItem key={s.id} s={s} {...props}>
          {children.has(s.id) ? branch(s.id) : null}
        </SessionItem>
      ))}
    </ul>
  );
  return branch(null);
}

function SessionItem(props: {
  s: Session;
  selected: string | null;
  busy: Record<string, boolean>;
  pending: Set<string>;
  onChoose: (id: string) => void;
  children?: preact.ComponentChildren;
}) {
  const { s } = props;
  return (
    <li>
      <button
        type="button"
        class={`session-item ${props.selected === s.id ? "selected" : ""}`}
        aria-current={props.selected === s.id ? "page" : undefined}
        onClick={() => props.onChoose(s.id)}
      >
        <span class="title">{s.title}</span>
        <span class="meta">
          <span class={`dot ${props.busy[s.id] ? "busy" : "idle"}`} aria-label={props.busy[s.id] ? "busy" : "idle"} />
          {ago(s.time.updated)} · {cost(s.cost)}
          {props.pending.has(s.id) && <span class="badge badge-pending">needs you</span>}
        </span>
      </button>
      {props.children}
    </li>
  );
}

function SessionActions(props: { session: Session; onChanged: () => void; onForked: (id: string) => void; onDeleted: () => void }) {
  const { session } = props;
  const [renaming, setRenaming] = useState(false);
  const [title, setTitle] = useState(session.title);
  const [error, setError] = useState<string | null>(null);
  const fail = (e: unknown) => setError(e instanceof Error ? e.message : String(e));
  return (
    <div class="session-actions">
      {renaming ? (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            api.renameSession(session.id, title).then(() => (setRenaming(false), props.onChanged()), fail);
          }}
        >
          <input aria-label="Session title" value={title} onInput={(e) => setTitle(e.currentTarget.value)} />
          <button type="submit">Save</button>
          <button type="button" onClick={() => setRenaming(false)}>
            Cancel
          </button>
        </form>
      ) : (
        <>
          <button type="button" onClick={() => (setTitle(session.title), setRenaming(true))}>
            Rename
          </button>
          <button type="button" onClick={() => api.forkSession(session.id).then((s) => props.onForked(s.id), fail)}>
            Fork
          </button>
          <button
            type="button"
            class="danger"
            onClick={() => {
              if (confirm(`Delete "${session.title}"?`))
                api.deleteSession(session.id).then(() => (props.onDeleted(), props.onChanged()), fail);
            }}
          >
            Delete
          </button>
        </>
      )}
      {error && <span role="alert">{error}</span>}
    </div>
  );
}

function NewSession({ onCreated }: { onCreated: (s: Session) => void }) {
  const [agents, setAgents] = useState<AgentInfo[]>([]);
  const [providers, setProviders] = useState<Provider[]>([]);
  const [agent, setAgent] = useState("");
  const [model, setModel] = useState("");
  const [title, setTitle] = useState("");
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    api.agents().then((list) => setAgents(list.filter((a) => !a.hidden && a.mode !== "subagent")), () => {});
    api.providers().then((p) => setProviders(p.all ?? []), () => {});
  }, []);
  const submit = (e: Event) => {
    e.preventDefault();
    const [providerID, ...rest] = model.split("/");
    api
      .createSession({
        ...(title ? { title } : {}),
        // Sessions take no agent or model; the console keeps the choice and sends it with each prompt.
        metadata: { ...(agent ? { agent } : {}), ...(model ? { model: { providerID, modelID: rest.join("/") } } : {}) },
      })
      .then(onCreated, (err) => setError(String(err.message ?? err)));
  };
  return (
    <form class="new-session card" onSubmit={submit} aria-label="New session">
      <h2>New session</h2>
      <label class="field">
        <span>Title (optional)</span>
        <input value={title} onInput={(e) => setTitle(e.currentTarget.value)} />
      </label>
      <label class="field">
        <span>Agent</span>
        <select value={agent} onChange={(e) => setAgent(e.currentTarget.value)}>
          <option value="">Default</option>
          {agents.map((a) => (
            <option key={a.name} value={a.name}>
              {a.name}
            </option>
          ))}
        </select>
      </label>
      <label class="field">
        <span>Model</span>
        <select value={model} onChange={(e) => setModel(e.currentTarget.value)}>
          <option value="">Default</option>
          {providers.flatMap((p) =>
            Object.values(p.models ?? {}).map((m) => (
              <option key={`${p.id}/${m.id}`} value={`${p.id}/${m.id}`}>
                {p.name ?? p.id} / {m.name ?? m.id}
              </option>
            )),
          )}
        </select>
      </label>
      <button type="submit" class="primary">
        Create
      </button>
      {error && <p role="alert">{error}</p>}
    </form>
  );
}

function SignIn({ onKey, error }: { onKey: (key: string) => void; error: string | null }) {
  const [key, setKey] = useState("");
  return (
    <main class="center">
      <form
        class="card signin"
        aria-label="Sign in"
        onSubmit={(e) => {
          e.preventDefault();
          if (key.trim()) onKey(key);
        }}
      >
        <h1>Agent Forge</h1>
        <p>This server requires an API key.</p>
        <label class="field">
          <span>API key</span>
          <input type="password" autocomplete="off" value={key} onInput={(e) => setKey(e.currentTarget.value)} />
        </label>
        <button type="submit" class="primary">
          Sign in
        </button>
        {error && <p role="alert">{error}</p>}
      </form>
    </main>
  );
}

render(<App />, document.getElementById("app")!);
