// One task, live: status, stage progress, attempts, error.
import { useSignal } from '@preact/signals';
import { useEffect } from 'preact/hooks';
import type { TaskFieldsFragment } from '../gql/graphql';
import { isTerminal, watchTask } from '../tasks/watch';

export type LiveTask = TaskFieldsFragment & { stagesTotal?: number | null };

export function Progress({ task }: { task: LiveTask }) {
  const total = task.stagesTotal ?? null;
  const done = task.status === 'SUCCEEDED' ? (total ?? task.stagesDone) : task.stagesDone;
  const percent = total ? Math.round((Math.min(done, total) / total) * 100) : task.status === 'SUCCEEDED' ? 100 : 0;
  return (
    <div class="row">
      <div
        class="progress"
        role="progressbar"
        aria-label={`Stages of task ${task.id.slice(0, 8)}`}
        aria-valuemin={0}
        aria-valuemax={total ?? undefined}
        aria-valuenow={done}
        aria-valuetext={total ? `${done} of ${total} stages` : `${done} stages`}
      >
        <span style={{ width: `${percent}%` }} />
      </div>
      <span class="hint">
        {done}
        {total ? `/${total}` : ''} {task.stage && !isTerminal(task.status) ? `· ${task.stage}` : ''}
      </span>
    </div>
  );
}

export function TaskCard({ initial }: { initial: LiveTask }) {
  const task = useSignal<LiveTask>(initial);
  useEffect(() => {
    if (isTerminal(initial.status)) return;
    let live = true;
    watchTask(initial.id, (update) => {
      if (live) task.value = { ...update, stagesTotal: task.value.stagesTotal };
    }).catch(() => undefined);
    return () => {
      live = false;
    };
  }, [initial.id]);
  const current = task.value;
  return (
    <div class="card task-card" role="status" aria-live="polite">
      <div class="row">
        <strong>{current.kind}</strong>
        <span class="task-status" data-status={current.status}>
          {current.status}
        </span>
        <span class="mono hint">{current.id}</span>
      </div>
      <Progress task={current} />
      <div class="hint">
        Queue {current.queue.toLowerCase()} · attempt {current.attemptCount}/{current.maxAttempts}
      </div>
      {current.error && <p class="alert error">{current.error}</p>}
    </div>
  );
}
