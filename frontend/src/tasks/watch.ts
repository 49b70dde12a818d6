// Waits for a task to end, following `taskUpdated`.
import { subscribe } from '../api/client';
import { TaskWatchDocument, type TaskFieldsFragment } from '../gql/graphql';

export type TaskView = TaskFieldsFragment;

const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'SUPERSEDED', 'CANCELLED']);

export function isTerminal(status: string): boolean {
  return TERMINAL.has(status);
}

/** Calls `onUpdate` on every change; resolves with the task once it has ended. */
export function watchTask(id: string, onUpdate?: (task: TaskView) => void): Promise<TaskView> {
  return new Promise((resolve, reject) => {
    const stop = subscribe(
      TaskWatchDocument,
      { id },
      (data) => {
        onUpdate?.(data.taskUpdated);
        if (isTerminal(data.taskUpdated.status)) {
          stop();
          resolve(data.taskUpdated);
        }
      },
      (error) => {
        if (error.code !== 'EVENTS_LAGGED') {
          stop();
          reject(error);
        }
      },
    );
  });
}
