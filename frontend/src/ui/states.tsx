// Loading, empty and error states, the same everywhere.
import type { ComponentChildren } from 'preact';
import { ApiError } from '../api/client';

export function Loading({ label = 'Loading…' }: { label?: string }) {
  return (
    <div class="state" role="status" aria-live="polite">
      <span class="spinner" aria-hidden="true" />
      <span>{label}</span>
    </div>
  );
}

export function Empty({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="state">
      <h2>{title}</h2>
      {children && <p>{children}</p>}
    </div>
  );
}

export function errorText(error: unknown): string {
  if (error instanceof ApiError) {
    if (error.code === 'RATE_LIMITED' && error.retryAfter) {
      return `Too many attempts. Try again in ${formatWait(error.retryAfter)}.`;
    }
    return error.message;
  }
  return error instanceof Error ? error.message : String(error);
}

export function formatWait(seconds: number): string {
  if (seconds < 60) return `${seconds} second${seconds === 1 ? '' : 's'}`;
  const minutes = Math.ceil(seconds / 60);
  return `${minutes} minute${minutes === 1 ? '' : 's'}`;
}

export function Failed({ error, retry }: { error: unknown; retry?: () => void }) {
  return (
    <div class="state" role="alert">
      <h2>Something went wrong</h2>
      <p>{errorText(error)}</p>
      {retry && (
        <button type="button" class="btn" onClick={retry}>
          Try again
        </button>
      )}
    </div>
  );
}
