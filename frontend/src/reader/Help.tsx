// `?`: every key, as mapped now.
import { bindings } from '../keyboard/keymap';
import { prefs } from '../state/prefs';
import { Modal } from '../ui/Modal';

export function keyLabel(keys: string): string {
  return keys
    .split(' ')
    .map((press) => press.replace('mod+', navigator.platform.startsWith('Mac') ? '⌘' : 'Ctrl+').replace('Arrow', ''))
    .join(' then ');
}

export function Help({ onClose }: { onClose: () => void }) {
  return (
    <Modal title="Keyboard shortcuts" onClose={onClose}>
      <div class="help-grid">
        {bindings(prefs.value.keys).map((binding) => (
          <>
            <span>
              <kbd>{keyLabel(binding.keys)}</kbd>
            </span>
            <span>{binding.label}</span>
          </>
        ))}
      </div>
      <p class="hint">
        Remap keys in <a href="/settings/keyboard">Settings → Keyboard</a>. Keys typed into a field stay in the field.
      </p>
    </Modal>
  );
}
