// dom.js -- the one element builder of the web UI's scripts (kernel.js,
// charts.js): el('td', {class: 'n'}, 'text', childNode).

export function el(tag, attrs = {}, ...children) {
	const e = document.createElement(tag);
	for (const [k, v] of Object.entries(attrs))
		e.setAttribute(k, v);
	for (const c of children)
		e.append(c instanceof Node ? c : document.createTextNode(String(c)));
	return e;
}
