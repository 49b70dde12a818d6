// Tasks: each queue's load and the newest tasks, kept live by one
// `events` subscription (task.updated); a changed row flashes in place.
import { useSignal } from '@preact/signals';
import { useEffect, useRef } from 'preact/hooks';
import { onReconnect, query, subscribe } from '../api/client';
import { LiveEventsDocument, LiveQueueStatsDocument, LiveTaskDocument, LiveTasksDocument, type LiveTasksQuery } from '../gql/graphql';
import { Empty, Failed, Loading } from '../ui/states';
import { LiveTabs } from './LiveTabs';
import { Progress, type LiveTask } from './TaskCard';

type Stats = LiveTasksQuery['queueStats'];
const SHOWN = 100;

export function Tasks() {
  const tasks = useSignal<LiveTask[]>([]);
  const stats = useSignal<Stats>([]);
  const state = useSignal<'loading' | 'ready' | Error>('loading');
  const flashed = useRef(new Map<string, number>());

  const load = () =>
    query(LiveTasksDocument, { first: SHOWN })
      .then((data) => {
        tasks.value = data.tasks.nodes;
        stats.value = data.queueStats;
        state.value = 'ready';
      })
      .catch((caught) => (state.value = caught as Error));

  useEffect(() => {
    void load();
    let statsTimer: ReturnType<typeof setTimeout> | null = null;
    const refreshStats = () => {
      statsTimer ??= setTimeout(() => {
        statsTimer = null;
        query(LiveQueueStatsDocument, {})
          .then((data) => (stats.value = data.queueStats))
          .catch(() => undefined);
      }, 500);
    };
    const stop = subscribe(
      LiveEventsDocument,
      { topics: ['task.updated'] },
      (data) => {
        const payload = data.events.payload as LiveTask;
        const index = tasks.value.findIndex((task) => task.id === payload.id);
        flashed.current.set(payload.id, performance.now());
        if (index >= 0) {
          const next = [...tasks.value];
          next[index] = { ...payload, stagesTotal: tasks.value[index].stagesTotal };
          tasks.value = next;
        } else {
          tasks.value = [{ ...payload, stagesTotal: null }, ...tasks.value].slice(0, SHOWN);
          // A new task: learn its stage count once.
          query(LiveTaskDocument, { id: payload.id })
            .then((result) => {
              const total = result.task?.stagesTotal ?? null;
              tasks.value = tasks.value.map((task) => (task.id === payload.id ? { ...task, stagesTotal: total } : task));
            })
            .catch(() => undefined);
        }
        refreshStats();
      },
      (error) => {
        if (error.code === 'EVENTS_LAGGED') void load();
      },
    );
    const stopReconnect = onReconnect(() => void load());
    return () => {
      stop();
      stopReconnect();
      if (statsTimer) clearTimeout(statsTimer);
    };
  }, []);

  const now = performance.now();
  return (
    <div class="page">
      <div class="toolbar">
        <div class="grow">
          <h1>Tasks</h1>
        </div>
        <LiveTabs current="tasks" />
      </div>
      <div class="page-inner wide">
        <h2>Queues</h2>
        <div class="queues">
          {stats.value.map((stat) => (
            <div class="queue-card" key={stat.queue}>
              <span>q:{stat.queue.toLowerCase()}</span>
              <strong aria-label={`${stat.queued} waiting in q:${stat.queue.toLowerCase()}`}>{stat.queued}</strong>
              <span>
                waiting{stat.delayed ? ` (${stat.delayed} held back)` : ''} · {stat.running} running
              </span>
            </div>
          ))}
        </div>
        <h2>Newest tasks</h2>
        {state.value === 'loading' ? (
          <Loading />
        ) : state.value instanceof Error ? (
          <Failed error={state.value} retry={load} />
        ) : !tasks.value.length ? (
          <Empty title="No tasks yet">Tasks appear here as they are created, and change as they run.</Empty>
        ) : (
          <table class="grid">
            <thead>
              <tr>
                <th scope="col">Task</th>
                <th scope="col">Status</th>
                <th scope="col">Stages</th>
                <th scope="col">Attempts</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {tasks.value.map((task) => (
                <tr key={task.id} class={(flashed.current.get(task.id) ?? -Infinity) > now - 1_200 ? 'flash' : ''} data-task={task.id}>
                  <td>
                    <div>{task.kind}</div>
                    <div class="mono hint">
                      {task.id.slice(0, 8)} · q:{task.queue.toLowerCase()}
                    </div>
                    {task.error && <div class="alert error">{task.error}</div>}
                  </td>
                  <td>
                    <span class="task-status" data-status={task.status}>
                      {task.status}
                    </span>
                  </td>
                  <td>
                    <Progress task={task} />
                  </td>
                  <td>
                    {task.attemptCount}/{task.maxAttempts}
                  </td>
                  <td>{new Date(task.createdAt).toLocaleTimeString()}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
    </div>
  );
}
