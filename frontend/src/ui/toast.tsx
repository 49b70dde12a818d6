// Short notices at the bottom of the screen, announced to screen readers.
import { signal } from '@preact/signals';

export interface Toast {
  id: number;
  text: string;
  action?: { label: string; run: () => void };
}

export const toasts = signal<Toast[]>([]);
let next = 1;

export function toast(text: string, action?: Toast['action'], ms = 5_000): void {
  const id = next++;
  toasts.value = [...toasts.value, { id, text, action }];
  setTimeout(() => dismiss(id), ms);
}

export function dismiss(id: number): void {
  toasts.value = toasts.value.filter((item) => item.id !== id);
}

export function Toasts() {
  return (
    <div class="toasts" role="status" aria-live="polite">
      {toasts.value.map((item) => (
        <div class="toast" key={item.id}>
          <span>{item.text}</span>
          {item.action && (
            <button
              type="button"
              onClick={() => {
                item.action?.run();
                dismiss(item.id);
              }}
            >
              {item.action.label}
            </button>
          )}
        </div>
      ))}
    </div>
  );
}
