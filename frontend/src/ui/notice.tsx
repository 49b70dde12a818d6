// The outcome of the last action a form or a button took.

export interface NoticeState {
  ok?: string;
  error?: string;
}

/** An alert for an error, a status line for success, nothing otherwise. */
export function Notice({ state }: { state: NoticeState }) {
  if (state.error)
    return (
      <p class="alert error" role="alert">
        {state.error}
      </p>
    );
  if (state.ok)
    return (
      <p class="alert ok" role="status">
        {state.ok}
      </p>
    );
  return null;
}
