import { describe, expect, test } from 'vitest';
import { DEFAULT_BINDINGS, KeyMatcher, bindings, conflicts, isTypingTarget, normalizeKeys, pressName } from './keymap';

describe('keymap', () => {
  test('the Google Reader keys are the defaults', () => {
    const matcher = new KeyMatcher(bindings());
    expect(matcher.press({ key: 'j' })).toBe('next');
    expect(matcher.press({ key: 'k' })).toBe('prev');
    expect(matcher.press({ key: 'n' })).toBe('nextNoOpen');
    expect(matcher.press({ key: 'p' })).toBe('prevNoOpen');
    expect(matcher.press({ key: 'm' })).toBe('toggleRead');
    expect(matcher.press({ key: 's' })).toBe('toggleStar');
    expect(matcher.press({ key: 'o' })).toBe('openArticle');
    expect(matcher.press({ key: 'v' })).toBe('openOriginal');
    expect(matcher.press({ key: '?' })).toBe('help');
    expect(matcher.press({ key: 'k', metaKey: true })).toBe('palette');
    expect(matcher.press({ key: 'K', ctrlKey: true })).toBe('palette');
  });

  test('two-key sequences wait for their second key', () => {
    const matcher = new KeyMatcher(bindings());
    expect(matcher.press({ key: 'g' })).toBe('pending');
    expect(matcher.press({ key: 'u' })).toBe('goUnread');
    expect(matcher.press({ key: 'g' })).toBe('pending');
    expect(matcher.press({ key: 's' })).toBe('goStarred');
    // After a prefix, a key that ends no sequence counts on its own.
    expect(matcher.press({ key: 'g' })).toBe('pending');
    expect(matcher.press({ key: 'j' })).toBe('next');
    expect(matcher.press({ key: 'x' })).toBeNull();
  });

  test('modifier keys alone and Alt chords are not presses', () => {
    expect(pressName({ key: 'Shift' })).toBeNull();
    expect(pressName({ key: 'j', altKey: true })).toBeNull();
    expect(pressName({ key: 'A' })).toBe('A');
  });

  test('remapped keys replace the defaults, and only theirs', () => {
    const list = bindings({ next: 'J', toggleStar: 'Ctrl+S' });
    const matcher = new KeyMatcher(list);
    expect(matcher.press({ key: 'j' })).toBeNull();
    expect(matcher.press({ key: 'J' })).toBe('next');
    expect(matcher.press({ key: 's', ctrlKey: true })).toBe('toggleStar');
    expect(matcher.press({ key: 'k' })).toBe('prev');
    expect(list.find((binding) => binding.action === 'toggleStar')?.keys).toBe('mod+s');
  });

  test('conflicts are found: same keys, or one a prefix of another', () => {
    expect(conflicts(DEFAULT_BINDINGS)).toEqual([]);
    expect(conflicts(bindings({ toggleStar: 'j' }))).toEqual([['next', 'toggleStar']]);
    expect(conflicts(bindings({ refresh: 'g' }))).toContainEqual(['refresh', 'goUnread']);
  });

  test('keys typed into fields are the user’s', () => {
    const input = document.createElement('input');
    const area = document.createElement('textarea');
    const editable = document.createElement('div');
    editable.setAttribute('contenteditable', 'true');
    const inner = document.createElement('span');
    editable.append(inner);
    document.body.append(input, area, editable);
    expect(isTypingTarget(input)).toBe(true);
    expect(isTypingTarget(area)).toBe(true);
    expect(isTypingTarget(inner)).toBe(true);
    expect(isTypingTarget(document.body)).toBe(false);
    expect(isTypingTarget(null)).toBe(false);
  });

  test('normalizing keeps sequences and case of plain keys', () => {
    expect(normalizeKeys('  g   u ')).toBe('g u');
    expect(normalizeKeys('Cmd+K')).toBe('mod+k');
    expect(normalizeKeys('A')).toBe('A');
  });
});
