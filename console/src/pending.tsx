// Permission requests and questions, answered inline in the transcript.
import { useState } from "preact/hooks";
import { api } from "./api";
import { pretty } from "./format";
import type { PermissionRequest, Question } from "./types";

export function PermissionCard({ request }: { request: PermissionRequest }) {
  const [message, setMessage] = useState("");
  const [error, setError] = useState<string | null>(null);
  const reply = (kind: "once" | "always" | "reject") =>
    api.replyPermission(request.id, kind, kind === "reject" ? message || undefined : undefined).catch((e) =>
      setError(String(e.message ?? e)),
    );
  const detail = request.metadata && Object.keys(request.metadata).length ? pretty(request.metadata) : null;
  return (
    <section class="card permission" aria-label={`Permission request: ${request.permission}`}>
      <h3>
        Allow <code>{request.permission}</code>?
      </h3>
      <ul class="patterns">
        {request.patterns.map((p) => (
          <li key={p}>
            <code>{p}</code>
          </li>
        ))}
      </ul>
      {detail && (
        <details>
          <summary>Details</summary>
          <pre class="code">{detail}</pre>
        </details>
      )}
      <label class="field">
        <span>Message with a rejection (optional)</span>
        <input value={message} onInput={(e) => setMessage(e.currentTarget.value)} />
      </label>
      <div class="actions">
        <button type="button" class="primary" onClick={() => reply("once")}>
          Allow once
        </button>
        <button type="button" onClick={() => reply("always")}>
          Allow always
        </button>
        <button type="button" class="danger" onClick={() => reply("reject")}>
          Reject
        </button>
      </div>
      {error && <p role="alert">{error}</p>}
    </section>
  );
}

export function QuestionCard({ question }: { question: Question }) {
  const [chosen, setChosen] = useState<string[][]>(question.questions.map(() => []));
  const [typed, setTyped] = useState<string[]>(question.questions.map(() => ""));
  const [error, setError] = useState<string | null>(null);

  const toggle = (index: number, label: string, multiple: boolean) =>
    setChosen((all) =>
      all.map((list, i) =>
        i !== index ? list : multiple ? (list.includes(label) ? list.filter((l) => l !== label) : [...list, label]) : [label],
      ),
    );
  const submit = (e: Event) => {
    e.preventDefault();
    const answers = chosen.map((list, i) => (typed[i].trim() ? [...list, typed[i].trim()] : list));
    api.replyQuestion(question.id, answers).catch((err) => setError(String(err.message ?? err)));
  };
  return (
    <form class="card question" aria-label="Question" onSubmit={submit}>
      {question.questions.map((item, index) => (
        <fieldset key={index}>
          <legend>{item.header ? `${item.header}: ${item.question}` : item.question}</legend>
          {(item.options ?? []).map((option) => (
            <label key={option.label} class="option">
              <input
                type={item.multiple ? "checkbox" : "radio"}
                name={`${question.id}-${index}`}
                checked={chosen[index].includes(option.label)}
                onChange={() => toggle(index, option.label, !!item.multiple)}
              />
              <span>{option.label}</span>
              {option.description && <small>{option.description}</small>}
            </label>
          ))}
          <label class="field">
            <span>Your own answer</span>
            <input
              value={typed[index]}
              onInput={(e) => {
                const value = e.currentTarget.value;
                setTyped((all) => all.map((t, i) => (i === index ? value : t)));
              }}
            />
          </label>
        </fieldset>
      ))}
      <div class="actions">
        <button type="submit" class="primary">
          Answer
        </button>
        <button type="button" onClick={() => api.rejectQuestion(question.id).catch((e) => setError(String(e)))}>
          Dismiss
        </button>
      </div>
      {error && <p role="alert">{error}</p>}
    </form>
  );
}
