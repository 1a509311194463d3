/**
 * Copy buttons: `<button data-copy="some-id">` copies the text of the element with that id. The clipboard
 * API is tried first; where it is missing or refuses, a hidden textarea is selected and
 * `document.execCommand('copy')` runs; where that fails too, the text is left selected on the page so
 * that the user can copy it by hand.
 */

const COPIED_LABEL = 'Copied';
const RESET_AFTER_MS = 2000;

/** The button's own content, while it shows "Copied"; and the timer that puts it back. */
const pending = new WeakMap<HTMLButtonElement, { children: Node[]; timer: number }>();

let liveRegion: HTMLElement | undefined;

/** The page's polite live region for short announcements, created if the page has none. */
function announcer(): HTMLElement {
  if (liveRegion?.isConnected) return liveRegion;
  let region = document.querySelector<HTMLElement>('.visually-hidden[aria-live="polite"]');
  if (!region) {
    region = document.createElement('p');
    region.className = 'visually-hidden';
    region.setAttribute('aria-live', 'polite');
    document.body.append(region);
  }
  liveRegion = region;
  return region;
}

/** Screen readers announce changes only: empty the region, then fill it a moment later. */
function announce(message: string) {
  const region = announcer();
  region.textContent = '';
  window.setTimeout(() => {
    region.textContent = message;
  }, 100);
}

function textOf(element: Element): string {
  const text =
    element instanceof HTMLInputElement || element instanceof HTMLTextAreaElement
      ? element.value
      : (element.textContent ?? '');
  return text.trim();
}

async function clipboardApiCopy(text: string): Promise<boolean> {
  // Missing outside secure contexts, whatever the DOM typings say.
  const clipboard: Clipboard | undefined = navigator.clipboard;
  if (typeof clipboard?.writeText !== 'function') return false;
  try {
    await clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

/** The old way: select the text in an off-screen textarea and ask the browser to copy the selection. */
function execCommandCopy(text: string, returnFocusTo: HTMLElement): boolean {
  const area = document.createElement('textarea');
  area.value = text;
  area.readOnly = true;
  area.className = 'visually-hidden';
  // Fixed at the top of the viewport, so that focusing it cannot scroll the page. (Setting styles through
  // the CSSOM is allowed by the pages' style-src 'self'; style attributes in markup would not be.)
  area.style.position = 'fixed';
  area.style.top = '0';
  area.style.left = '0';
  area.setAttribute('aria-hidden', 'true');
  area.tabIndex = -1;
  document.body.append(area);
  let copied = false;
  try {
    area.focus({ preventScroll: true });
    area.select();
    area.setSelectionRange(0, text.length);
    copied = document.execCommand('copy');
  } catch {
    copied = false;
  } finally {
    area.remove();
    returnFocusTo.focus({ preventScroll: true });
  }
  return copied;
}

/** Last resort: leave the text selected, so that Ctrl+C or the context menu copies it. */
function selectForManualCopy(element: Element) {
  const selection = window.getSelection();
  if (!selection) return;
  if (element instanceof HTMLInputElement || element instanceof HTMLTextAreaElement) {
    element.focus();
    element.select();
    return;
  }
  const range = document.createRange();
  range.selectNodeContents(element);
  selection.removeAllRanges();
  selection.addRange(range);
}

function showCopied(button: HTMLButtonElement) {
  const earlier = pending.get(button);
  if (earlier) window.clearTimeout(earlier.timer);
  const children = earlier?.children ?? [...button.childNodes];
  button.textContent = COPIED_LABEL;
  const timer = window.setTimeout(() => {
    pending.delete(button);
    button.replaceChildren(...children);
  }, RESET_AFTER_MS);
  pending.set(button, { children, timer });
}

async function copyFor(button: HTMLButtonElement) {
  const id = button.dataset.copy;
  const source = id ? document.getElementById(id) : null;
  if (!source) return;
  const text = textOf(source);
  const copied = (await clipboardApiCopy(text)) || execCommandCopy(text, button);
  if (copied) {
    showCopied(button);
    announce('Copied to the clipboard');
  } else {
    selectForManualCopy(source);
    announce('Could not copy automatically. The text is selected: press Control+C or Command+C to copy it.');
  }
}

export function setUpCopyButtons() {
  // The live region must be on the page before it speaks, so make it now if there is anything to copy.
  if (document.querySelector('button[data-copy]')) announcer();
  // One listener for all buttons, present and future.
  document.addEventListener('click', (event) => {
    const target = event.target;
    if (!(target instanceof Element)) return;
    const button = target.closest('button[data-copy]');
    if (!(button instanceof HTMLButtonElement) || button.disabled) return;
    event.preventDefault();
    void copyFor(button);
  });
}
