// kernel.js -- "Will it load for me?" on a kernel's page: the environment
// (typed in, or pasted as the one line the page's python -c snippet prints)
// is sent to the variants API (GET .../variants?compatible=true, through the
// page's same-origin path, data-endpoint), which answers what the kernels
// loader would pick and why it rejects every other variant. Nothing is
// decided here; without JavaScript the form goes to the page, which answers
// the same.

import { el } from './dom.js';
import { copyButton } from './copy.js';

const form = document.getElementById('wil-form');
const out = document.getElementById('wil-result');

// Versions are compared as MAJOR.MINOR: "2.8.0" -> "2.8", "6.3.42131-fa1d" -> "6.3".
export function majorMinor(v) {
	const m = /^(\d+)\.(\d+)/.exec(String(v).trim());
	return m ? `${m[1]}.${m[2]}` : String(v).trim();
}

// "torch=2.8.0 cuda=12.8 os=linux arch=x86_64" -> {torch, backend, version, os, arch, macos}
export function parseEnvLine(line) {
	const env = {};
	for (const part of String(line).trim().split(/\s+/)) {
		const eq = part.indexOf('=');
		if (eq <= 0)
			continue;
		const key = part.slice(0, eq).toLowerCase(), value = part.slice(eq + 1);
		if (key === 'torch')
			env.torch = majorMinor(value);
		else if (key === 'backend')
			env.backend = value;
		else if (['cuda', 'rocm', 'xpu', 'cann'].includes(key) && value && value !== 'None') {
			env.backend = key;
			env.version = majorMinor(value);
		} else if (key === 'os')
			env.os = value.toLowerCase();
		else if (key === 'macos' && value)
			env.macos = majorMinor(value);
		else if (key === 'arch')
			env.arch = value === 'arm64' ? 'aarch64' : value === 'AMD64' ? 'x86_64' : value;
	}
	return env;
}

// The query the variants API reads: torch=, one of cuda=/rocm=/xpu=/cann=
// for a versioned backend (else backend=), os=, macos= (on darwin), arch=.
export function envQuery(env) {
	const q = new URLSearchParams({ compatible: 'true' });
	if (env.revision)
		q.set('revision', env.revision);
	if (env.torch)
		q.set('torch', env.torch);
	if (env.backend && env.version && ['cuda', 'rocm', 'xpu', 'cann'].includes(env.backend))
		q.set(env.backend, env.version);
	else if (env.backend)
		q.set('backend', env.backend);
	if (env.os)
		q.set('os', env.os);
	if (env.macos && env.os === 'darwin')
		q.set('macos', env.macos);
	if (env.arch)
		q.set('arch', env.arch);
	return q;
}

function table(caption, head, rows, id) {
	const t = el('table', { id });
	t.append(el('caption', { class: 'muted' }, caption));
	const thead = el('thead'), tr = el('tr');
	for (const h of head)
		tr.append(el('th', { scope: 'col' }, h));
	thead.append(tr);
	const tbody = el('tbody');
	for (const r of rows) {
		const row = el('tr');
		r.forEach((cell, i) => row.append(i === 0 ? el('th', { scope: 'row', class: 'mono' }, cell) : el('td', {}, cell)));
		tbody.append(row);
	}
	t.append(thead, tbody);
	return t;
}

function render(answer) {
	out.replaceChildren();
	const selected = answer.selected;
	out.append(el('p', { id: 'wil-selected', 'data-selected': selected || '' },
		selected ? 'get_kernel would load: ' : 'No variant of this revision loads in that environment.',
		selected ? el('strong', { class: 'mono' }, selected) : ''));
	for (const w of answer.warnings || [])
		out.append(el('p', { class: 'notice' }, w));
	const accepted = (answer.variants || []).map((v) => [v.name, String(v.rank)]);
	if (accepted.length)
		out.append(table('Variants that would load, best first', ['Variant', 'Rank'], accepted, 'wil-accepted'));
	const rejected = (answer.rejected || []).map((r) => [r.name, r.reason]);
	if (rejected.length)
		out.append(table('Variants the loader rejects, and why', ['Variant', 'Reason'], rejected, 'wil-rejected'));
}

function fromForm() {
	const data = new FormData(form);
	return {
		revision: form.dataset.revision,
		torch: majorMinor(data.get('torch') || ''),
		backend: data.get('backend'),
		version: majorMinor(data.get('backend_version') || ''),
		os: data.get('os'),
		macos: majorMinor(data.get('macos') || ''),
		arch: data.get('arch'),
	};
}

function fillForm(env) {
	const set = (id, v) => { if (v !== undefined && v !== '') document.getElementById(id).value = v; };
	set('wil-torch', env.torch);
	set('wil-backend', env.backend);
	set('wil-backend_version', env.version);
	set('wil-os', env.os);
	set('wil-macos', env.macos);
	set('wil-arch', env.arch);
}

async function check(event) {
	event.preventDefault();
	const env = fromForm();
	out.textContent = 'Asking the hub…';
	try {
		const res = await fetch(`${form.dataset.endpoint}?${envQuery(env)}`, { headers: { Accept: 'application/json' } });
		const body = await res.json();
		if (!res.ok) {
			out.replaceChildren(el('p', { class: 'problem', role: 'alert' }, body.error || `HTTP ${res.status}`));
			return;
		}
		render(body);
	} catch (err) {
		out.replaceChildren(el('p', { class: 'problem', role: 'alert' }, String(err)));
	}
}

if (form && out) {
	document.getElementById('wil-paste-box').hidden = false;
	document.getElementById('wil-paste').addEventListener('input', (e) => fillForm(parseEnvLine(e.target.value)));
	form.addEventListener('submit', check);
}

// Copy buttons for the usage snippets (the text stays selectable without JS).
for (const code of document.querySelectorAll('pre > code[id^="snippet-"], pre > code#env-snippet'))
	code.parentElement.after(copyButton(code, `${code.id.replace('snippet-', '')} snippet`));
