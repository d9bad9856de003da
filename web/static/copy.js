// copy.js -- Copy buttons: copyButton(code, what) for a page's script to
// place, and one after every <code data-copy="what"> (the new token on
// /settings/tokens). Without JavaScript the text stays selectable.

import { el } from './dom.js';

export function copyButton(code, what) {
	const button = el('button', { type: 'button', class: 'copy', 'aria-label': `Copy ${what}` }, 'Copy');
	button.addEventListener('click', async () => {
		try {
			await navigator.clipboard.writeText(code.textContent);
			button.textContent = 'Copied';
		} catch {
			button.textContent = 'Select and copy';
		}
		setTimeout(() => { button.textContent = 'Copy'; }, 2000);
	});
	return button;
}

for (const code of document.querySelectorAll('code[data-copy]'))
	code.after(' ', copyButton(code, code.dataset.copy));
