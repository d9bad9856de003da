// charts.js -- a kernel's benchmarks and downloads, drawn with uPlot (the
// one chart library, compiled into khub) from the benchmark and download
// APIs (through the page's same-origin paths): latency by GPU and backend,
// speedup against the reference, history over revisions, two revisions side
// by side, downloads per variant per day. Each chart says how many series it
// drew in data-series; every number is also in a table.

import { el } from './dom.js';

const uPlot = window.uPlot;

function table(head, rows, caption) {
	const t = el('table');
	if (caption)
		t.append(el('caption', { class: 'muted' }, caption));
	const tr = el('tr');
	for (const h of head)
		tr.append(el('th', { scope: 'col' }, h));
	const tbody = el('tbody');
	for (const r of rows) {
		const row = el('tr');
		r.forEach((c, i) => row.append(el(i ? 'td' : 'th', i ? {} : { scope: 'row' }, c)));
		tbody.append(row);
	}
	t.append(el('thead', {}, tr), tbody);
	return t;
}

const palette = ['#0b5cad', '#d9480f', '#116329', '#8250df', '#a40e26', '#1b7c83', '#9a6700', '#57606a'];
const fmt = (v) => (v == null ? '—' : Number(v).toPrecision(4));

// Axis text and grid in the page's colours (khub.css variables): readable
// in the dark scheme too, where uPlot's default black is not.
function axisColours() {
	const css = getComputedStyle(document.documentElement), v = (name) => css.getPropertyValue(name).trim();
	return { stroke: v('--fg'), grid: { stroke: v('--line') }, ticks: { stroke: v('--line') } };
}

// Draw into box; data[0] is x, one array per series after it.
function draw(box, names, data, opts = {}) {
	box.replaceChildren();
	box.dataset.series = String(names.length);
	if (!uPlot) {
		box.append(el('p', { class: 'muted' }, 'The chart library is not available.'));
		return;
	}
	const series = [{ label: opts.xLabel || 'x', value: opts.xValue }];
	names.forEach((name, i) => series.push({
		label: name, stroke: palette[i % palette.length], width: 2,
		fill: opts.bars ? palette[i % palette.length] + '99' : undefined,
		paths: opts.bars ? uPlot.paths.bars({ size: [0.8 / Math.max(1, names.length), 60], align: 0 }) : undefined,
		points: { show: !opts.bars },
		value: (u, v) => fmt(v),
	}));
	const width = Math.max(320, Math.min(box.clientWidth || 800, 1100));
	new uPlot({
		width, height: 280, series, scales: { x: { time: !!opts.time } },
		axes: [{ values: opts.xTicks, space: 40, ...axisColours() }, { label: opts.yLabel || '', ...axisColours() }],
	}, data, box);
	box.setAttribute('role', 'img');
	box.setAttribute('aria-label', opts.label || names.join(', '));
}

async function getJSON(url) {
	const res = await fetch(url, { headers: { Accept: 'application/json' } });
	if (!res.ok)
		throw new Error(`${url}: HTTP ${res.status}`);
	return res.json();
}

// Flatten runs into one row per result.
function flatten(runs) {
	const rows = [];
	for (const run of runs) {
		const m = run.machineInfo || {};
		for (const r of run.results || [])
			rows.push({ id: run.id, at: run.submittedAt, commit: run.commit, gpu: m.gpu || '?',
				backend: m.backend || '?', workload: r.workload, mean: r.timingResults?.mean_ms });
	}
	return rows.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.id - b.id));
}

function latencyChart(rows) {
	const box = document.getElementById('chart-latency');
	const workloads = [...new Set(rows.map((r) => r.workload))].sort();
	const machines = [...new Set(rows.map((r) => `${r.gpu} · ${r.backend}`))].sort();
	const latest = new Map();	// rows are oldest first: the last one wins
	for (const r of rows)
		latest.set(`${r.gpu} · ${r.backend}\u001f${r.workload}`, r.mean);
	const data = [workloads.map((_, i) => i)];
	for (const m of machines)
		data.push(workloads.map((w) => latest.get(`${m}\u001f${w}`) ?? null));
	draw(box, machines, data, { bars: true, yLabel: 'ms', xTicks: (u, ticks) => ticks.map((t) => workloads[t] ?? ''),
		label: 'Latest latency per workload, one series per GPU and backend' });
	const details = el('details', {}, el('summary', {}, 'The numbers'));
	details.append(table(['Workload', ...machines], workloads.map((w, i) => [w, ...data.slice(1).map((s) => fmt(s[i]))])));
	box.after(details);
}

// One GPU and backend at a time (a select picks which): a series per
// workload, a point per run, oldest first.
function historyChart(rows) {
	const box = document.getElementById('chart-history');
	const machines = [...new Set(rows.map((r) => `${r.gpu} · ${r.backend}`))].sort();
	const select = el('select', { id: 'history-machine' }, ...machines.map((m) => el('option', { value: m }, m)));
	const label = el('label', { for: 'history-machine' }, 'GPU and backend ');
	box.before(el('div', { class: 'env' }, label, select));
	const show = () => {
		const mine = rows.filter((r) => `${r.gpu} · ${r.backend}` === select.value);
		const workloads = [...new Set(mine.map((r) => r.workload))].sort();
		const runs = [...new Map(mine.map((r) => [r.id, r])).values()];
		const data = [runs.map((_, i) => i)];
		for (const w of workloads)
			data.push(runs.map((run) => mine.find((r) => r.id === run.id && r.workload === w)?.mean ?? null));
		draw(box, workloads, data, { yLabel: 'ms', xTicks: (u, ticks) => ticks.map((t) => (runs[t] ? runs[t].commit.slice(0, 7) : '')),
			label: `Mean latency per run on ${select.value}, one series per workload` });
	};
	select.addEventListener('change', show);
	show();
}

function compare(rows) {
	const a = document.getElementById('cmp-a'), b = document.getElementById('cmp-b');
	const out = document.getElementById('bench-compare-table');
	const commits = [...new Set(rows.map((r) => r.commit))];
	for (const sel of [a, b])
		sel.replaceChildren(...commits.map((c) => el('option', { value: c }, c.slice(0, 10))));
	if (commits.length > 1)
		b.value = commits[commits.length - 1], a.value = commits[commits.length - 2];
	const show = () => {
		const at = (commit) => {
			const m = new Map();
			for (const r of rows)
				if (r.commit === commit)
					m.set(`${r.workload}\u001f${r.gpu}`, r.mean);
			return m;
		};
		const ma = at(a.value), mb = at(b.value);
		const keys = [...new Set([...ma.keys(), ...mb.keys()])].sort();
		out.replaceChildren(table(['Workload', 'GPU', 'A (ms)', 'B (ms)', 'B / A'], keys.map((k) => {
			const [w, g] = k.split('\u001f'), va = ma.get(k), vb = mb.get(k);
			return [w, g, fmt(va), fmt(vb), va && vb ? (vb / va).toFixed(3) : '—'];
		}), 'Mean latency at two revisions'));
	};
	a.addEventListener('change', show);
	b.addEventListener('change', show);
	show();
}

async function speedup(endpoint) {
	const box = document.getElementById('bench-speedup');
	const agg = await getJSON(`${endpoint}/aggregate`);
	const rows = (agg.results || []).map((r) => [r.workload, r.gpu, fmt(r.medianMeanMs), r.referenceWorkload || '—',
		fmt(r.referenceMedianMeanMs), r.speedup == null ? '—' : `${Number(r.speedup).toFixed(2)}×`]);
	box.replaceChildren(table(['Workload', 'GPU', 'Median (ms)', 'Reference', 'Reference (ms)', 'Speedup'], rows,
		`Median of runs against the reference (${agg.reference})`));
}

async function benchmarks() {
	const section = document.getElementById('benchmarks');
	if (!section)
		return;
	const status = document.getElementById('bench-status');
	const endpoint = section.dataset.endpoint;
	try {
		const rows = flatten(await getJSON(`${endpoint}?limit=1000`));
		if (!rows.length) {
			status.textContent = 'No benchmark results yet.';
			return;
		}
		status.textContent = `${rows.length} results.`;
		latencyChart(rows);
		historyChart(rows);
		compare(rows);
		await speedup(endpoint);
	} catch (err) {
		status.textContent = `Benchmarks could not be loaded: ${err.message}`;
	}
}

async function downloads() {
	const section = document.getElementById('downloads');
	if (!section)
		return;
	const box = document.getElementById('chart-downloads');
	try {
		const d = await getJSON(`${section.dataset.endpoint}?days=30`);
		const variants = (d.variants || []).filter((v) => v.total > 0);
		if (!variants.length) {
			box.replaceChildren(el('p', { class: 'muted' }, 'No downloads in the last 30 days.'));
			box.dataset.series = '0';
			return;
		}
		const days = [...new Set(variants.flatMap((v) => v.days.map((x) => x.day)))].sort();
		const data = [days.map((day) => Date.parse(`${day}T00:00:00Z`) / 1000)];
		for (const v of variants) {
			const by = new Map(v.days.map((x) => [x.day, x.count]));
			data.push(days.map((day) => by.get(day) ?? 0));
		}
		draw(box, variants.map((v) => v.variant), data, { time: true, yLabel: 'downloads',
			label: 'Downloads per day, one series per variant' });
	} catch (err) {
		box.replaceChildren(el('p', { class: 'problem' }, `Downloads could not be loaded: ${err.message}`));
	}
}

benchmarks();
downloads();
