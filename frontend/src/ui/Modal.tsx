// A modal dialog (native <dialog>: focus trap, Escape, inert background).
import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import { IconClose } from './icons';

export function Modal(props: { title: string; onClose: () => void; children: ComponentChildren; footer?: ComponentChildren }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    return () => dialog?.close();
  }, []);
  return (
    <dialog ref={ref} class="modal" aria-labelledby="modal-title" onClose={props.onClose} onCancel={props.onClose}>
      <div class="modal-head">
        <h2 id="modal-title">{props.title}</h2>
        <button type="button" class="btn ghost icon" aria-label="Close" onClick={props.onClose}>
          <IconClose />
        </button>
      </div>
      <div class="modal-body">{props.children}</div>
      {props.footer && <div class="modal-foot">{props.footer}</div>}
    </dialog>
  );
}

