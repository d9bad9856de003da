// charts.js -- a kernel's benchmarks and downloads, drawn with uPlot (the
// one chart library, compiled into khub) from the benchmark and download
// APIs (through the page's same-origin paths): latency by workload and GPU
// at the revision benchmarked last, speedup against the reference, history
// over versions, two revisions side by side, downloads per variant per day.
// Bars are medians of the runs' mean latencies, whiskers their min-max (the
// aggregate API computes both). Revisions are named by the kernel's version
// branches (the page's data-versions), a short sha otherwise. Each chart
// says what it drew in data-chart (JSON: plot size, scales, series with
// colours, the bars or points in CSS pixels, the x labels), which the tests
// read; every number is also in a table.

import { el } from './dom.js';

const uPlot = window.uPlot;

function table(head, rows, caption, id) {
	const t = el('table', id ? { id } : {});
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

function numbers(box, id, head, rows, caption) {
	const old = document.getElementById(id)?.closest('details');
	const details = el('details', { class: 'chart-numbers' }, el('summary', {}, 'The numbers'),
		el('div', { class: 'table-wrap' }, table(head, rows, caption, id)));
	if (old)
		old.replaceWith(details);
	else
		box.after(details);
}

// Okabe-Ito: told apart with the common colour-vision deficiencies.
const palette = ['#0072b2', '#e69f00', '#009e73', '#cc79a7', '#d55e00', '#56b4e9', '#6e6e6e', '#8c8c8c'];
const colour = (i) => palette[i % palette.length];
const fmt = (v) => (v == null ? '—' : Number(v).toPrecision(4));
const FONT = '12px system-ui, -apple-system, "Segoe UI", sans-serif';

// Axis text and grid in the page's colours (khub.css variables): readable
// in the dark scheme too, where uPlot's default black is not.
function axisColours() {
	const css = getComputedStyle(document.documentElement), v = (name) => css.getPropertyValue(name).trim();
	return { stroke: v('--fg'), grid: { stroke: v('--line') }, ticks: { stroke: v('--line') } };
}

function unavailable(box) {
	if (uPlot)
		return false;
	box.replaceChildren(el('p', { class: 'muted' }, 'The chart library is not available.'));
	return true;
}

const chartWidth = (box) => Math.max(300, Math.min(box.clientWidth || 800, 1100));

// A y range from 0 to a round number above max.
function yRange(max) {
	return [0, uPlot.rangeNum(0, max > 0 ? max : 1, 0.1, true)[1]];
}

// Which of n labels to show, evenly, so that none overlaps: horizontal when
// they all fit, else turned 45 degrees and thinned to one per lineHeight.
function xLabels(labels, plotWidth) {
	const ctx = document.createElement('canvas').getContext('2d');
	ctx.font = FONT;
	const widths = labels.map((l) => ctx.measureText(l).width);
	const widest = Math.max(0, ...widths) + 8;
	const per = plotWidth / Math.max(1, labels.length);
	let rotate = 0, need = widest;
	if (widest > per && labels.length > 1 && widest > 3 * 18)
		rotate = 45, need = 18;
	const step = Math.max(1, Math.ceil(need / per));
	const shown = labels.map((_, i) => i).filter((i) => i % step === 0);
	const size = rotate ? Math.ceil(widest * Math.SQRT1_2) + 24 : 30;
	return { shown, rotate, size, widths };
}

// What a drawn chart tells the tests (CSS pixels from the plot's top left).
function describe(box, u, extra) {
	const ratio = uPlot.pxRatio;
	const model = {
		plot: { width: u.bbox.width / ratio, height: u.bbox.height / ratio },
		x: { min: u.scales.x.min, max: u.scales.x.max },
		y: { min: u.scales.y.min, max: u.scales.y.max, unit: extra.unit },
		series: u.series.slice(1).map((s) => ({ label: s.label, colour: s._stroke || extra.colours[s.label] })),
		...extra.model,
	};
	model.xLabels = u.axes[0]._splits.map((v, i) => ({ at: u.valToPos(v, 'x'), text: u.axes[0]._values[i],
		width: extra.labelWidth(u.axes[0]._values[i]) }));
	model.xRotate = u.axes[0]._rotate || 0;
	box.dataset.chart = JSON.stringify(model);
}

function labelWidth(text) {
	const ctx = document.createElement('canvas').getContext('2d');
	ctx.font = FONT;
	return ctx.measureText(String(text ?? '')).width;
}

// Grouped bars: one group per x label, one bar per series inside it, each
// at its own offset; a whisker from min to max over each bar. stats[s][g]
// is {median, min, max} or null.
function groupedBars(box, { groups, names, stats, xName, yLabel, label }) {
	box.replaceChildren();
	box.dataset.series = String(names.length);
	if (unavailable(box))
		return;
	const width = chartWidth(box), n = groups.length, k = names.length;
	const lab = xLabels(groups, width - 70);
	const slot = 0.8 / Math.max(1, k), gap = Math.min(slot * 0.1, 0.02);
	const top = Math.max(0, ...stats.flat().filter(Boolean).map((s) => Math.max(s.max ?? s.median, s.median)));
	const bars = names.map(() => []);
	const drawBars = (u) => {
		const ctx = u.ctx, ratio = uPlot.pxRatio, y0 = u.valToPos(0, 'y', true);
		ctx.save();
		ctx.beginPath();
		ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
		ctx.clip();
		names.forEach((_, s) => {
			bars[s] = [];
			stats[s].forEach((st, g) => {
				if (!st)
					return;
				const from = g - 0.4 + s * slot + gap, to = g - 0.4 + (s + 1) * slot - gap;
				const x0 = u.valToPos(from, 'x', true), x1 = u.valToPos(to, 'x', true), y = u.valToPos(st.median, 'y', true);
				ctx.fillStyle = colour(s);
				ctx.fillRect(x0, y, x1 - x0, y0 - y);
				const bar = { group: g, x0: (x0 - u.bbox.left) / ratio, x1: (x1 - u.bbox.left) / ratio,
					top: (y - u.bbox.top) / ratio, median: st.median };
				if (st.min != null && st.max != null) {
					const mid = (x0 + x1) / 2, cap = Math.min((x1 - x0) / 3, 6 * ratio);
					const ylo = u.valToPos(st.min, 'y', true), yhi = u.valToPos(st.max, 'y', true);
					ctx.strokeStyle = '#1f2328';
					ctx.lineWidth = Math.max(1, ratio);
					ctx.beginPath();
					ctx.moveTo(mid, ylo); ctx.lineTo(mid, yhi);
					ctx.moveTo(mid - cap, ylo); ctx.lineTo(mid + cap, ylo);
					ctx.moveTo(mid - cap, yhi); ctx.lineTo(mid + cap, yhi);
					ctx.stroke();
					Object.assign(bar, { min: st.min, max: st.max });
				}
				bars[s].push(bar);
			});
		});
		ctx.restore();
		describe(box, u, { unit: 'ms', colours: {}, labelWidth, model: { kind: 'bars', groups,
			series: names.map((name, s) => ({ label: name, colour: colour(s), bars: bars[s] })) } });
	};
	const series = [{ label: xName, value: (u, v) => groups[v] ?? '' }];
	names.forEach((name, s) => series.push({ label: name, stroke: colour(s), fill: colour(s), width: 1,
		paths: () => null, points: { show: false }, value: (u, v) => (v == null ? '—' : `${fmt(v)} ms`) }));
	const data = [groups.map((_, g) => g), ...stats.map((col) => col.map((st) => st?.median ?? null))];
	new uPlot({
		width, height: 300 + lab.size - 30, series, legend: { live: true },
		scales: { x: { time: false, range: () => [-0.5, n - 0.5] }, y: { range: () => yRange(top) } },
		axes: [
			{ ...axisColours(), splits: () => lab.shown, values: (u, splits) => splits.map((g) => groups[g]), rotate: lab.rotate,
				size: lab.size, font: FONT, grid: { show: false }, ticks: axisColours().ticks },
			{ ...axisColours(), label: yLabel, font: FONT, labelFont: FONT, size: 56 },
		],
		hooks: { draw: [drawBars] },
	}, data, box);
	box.setAttribute('role', 'img');
	box.setAttribute('aria-label', label);
}

async function getJSON(url) {
	const res = await fetch(url, { headers: { Accept: 'application/json' } });
	if (!res.ok)
		throw new Error(`${url}: HTTP ${res.status}`);
	return res.json();
}

// sha -> what the page calls it: its version branch, else a short sha.
function revisionNamer(versions) {
	const names = new Map(versions.map((v) => [v.sha, v.name]));
	return (sha) => names.get(sha) || sha.slice(0, 7);
}

// The revisions of the aggregate rows: versions in their order (v1, v2,
// ...), then other commits in the order they were last benchmarked.
function revisionOrder(rows, versions) {
	const number = new Map(versions.map((v) => [v.sha, Number(v.name.slice(1))]));
	const last = new Map();
	for (const r of rows)
		last.set(r.revision, Math.max(last.get(r.revision) ?? 0, r.latest.runId));
	return [...last.keys()].sort((a, b) => (number.get(a) ?? Infinity) - (number.get(b) ?? Infinity) ||
		last.get(a) - last.get(b));
}

const stat = (r) => (r ? { median: r.medianMeanMs, min: r.minMeanMs, max: r.maxMeanMs } : null);
const spreadCells = (r) => [String(r.count), fmt(r.medianMeanMs), fmt(r.minMeanMs), fmt(r.p25MeanMs),
	fmt(r.p75MeanMs), fmt(r.maxMeanMs)];
const spreadHead = ['Runs', 'Median (ms)', 'Min (ms)', 'P25 (ms)', 'P75 (ms)', 'Max (ms)'];

// Bars per workload, one per GPU, at the revision benchmarked last.
function latencyChart(rows, name) {
	const box = document.getElementById('chart-latency');
	const newest = rows.reduce((a, r) => (r.latest.runId > a.latest.runId ? r : a)).revision;
	const mine = rows.filter((r) => r.revision === newest);
	const workloads = [...new Set(mine.map((r) => r.workload))].sort();
	const gpus = [...new Set(mine.map((r) => r.gpu))].sort();
	const at = new Map(mine.map((r) => [`${r.workload}\u001f${r.gpu}`, r]));
	document.getElementById('latency-note').textContent = `At ${name(newest)}, the revision benchmarked last: ` +
		'each bar is the median of the runs\' mean latency in ms, its whisker the fastest to the slowest run.';
	groupedBars(box, { groups: workloads, names: gpus, xName: 'Workload', yLabel: 'ms (median of runs)',
		stats: gpus.map((g) => workloads.map((w) => stat(at.get(`${w}\u001f${g}`)))),
		label: `Median latency per workload at ${name(newest)}, one bar per GPU, whiskers min to max` });
	numbers(box, 'latency-table', ['Workload', 'GPU', ...spreadHead],
		mine.map((r) => [r.workload, r.gpu, ...spreadCells(r)]), `Latency at ${name(newest)}, over the runs' means`);
}

// One GPU at a time (a select picks which): a group per revision, a bar
// per workload.
function historyChart(rows, revisions, name) {
	const box = document.getElementById('chart-history');
	const gpus = [...new Set(rows.map((r) => r.gpu))].sort();
	const select = el('select', { id: 'history-gpu' }, ...gpus.map((g) => el('option', { value: g }, g)));
	box.before(el('div', { class: 'env' }, el('label', { for: 'history-gpu' }, 'GPU '), select));
	const show = () => {
		const mine = rows.filter((r) => r.gpu === select.value);
		const revs = revisions.filter((rev) => mine.some((r) => r.revision === rev));
		const workloads = [...new Set(mine.map((r) => r.workload))].sort();
		const at = new Map(mine.map((r) => [`${r.workload}\u001f${r.revision}`, r]));
		groupedBars(box, { groups: revs.map(name), names: workloads, xName: 'Revision', yLabel: 'ms (median of runs)',
			stats: workloads.map((w) => revs.map((rev) => stat(at.get(`${w}\u001f${rev}`)))),
			label: `Median latency per revision on ${select.value}, one bar per workload, whiskers min to max` });
		box.dataset.revisions = JSON.stringify(revs);
		numbers(box, 'history-table', ['Revision', 'Commit', 'Workload', ...spreadHead],
			revs.flatMap((rev) => workloads.filter((w) => at.has(`${w}\u001f${rev}`)).map((w) =>
				[name(rev), rev.slice(0, 10), w, ...spreadCells(at.get(`${w}\u001f${rev}`))])),
			`Latency per revision on ${select.value}, over the runs' means`);
	};
	select.addEventListener('change', show);
	show();
}

function compare(rows, revisions, name) {
	const a = document.getElementById('cmp-a'), b = document.getElementById('cmp-b');
	const out = document.getElementById('bench-compare-table');
	for (const sel of [a, b])
		sel.replaceChildren(...revisions.map((rev) => el('option', { value: rev, title: rev },
			name(rev) === rev.slice(0, 7) ? rev.slice(0, 10) : `${name(rev)} (${rev.slice(0, 7)})`)));
	if (revisions.length > 1)
		b.value = revisions[revisions.length - 1], a.value = revisions[revisions.length - 2];
	const show = () => {
		const at = (rev) => new Map(rows.filter((r) => r.revision === rev).map((r) => [`${r.workload}\u001f${r.gpu}`, r]));
		const ma = at(a.value), mb = at(b.value);
		const keys = [...new Set([...ma.keys(), ...mb.keys()])].sort();
		const range = (r) => (r ? `${fmt(r.minMeanMs)}–${fmt(r.maxMeanMs)}` : '—');
		out.replaceChildren(table(['Workload', 'GPU', `${name(a.value)} median (ms)`, `${name(a.value)} min–max`,
			`${name(b.value)} median (ms)`, `${name(b.value)} min–max`, 'B / A'], keys.map((k) => {
			const [w, g] = k.split('\u001f'), ra = ma.get(k), rb = mb.get(k);
			return [w, g, fmt(ra?.medianMeanMs), range(ra), fmt(rb?.medianMeanMs), range(rb),
				ra && rb ? (rb.medianMeanMs / ra.medianMeanMs).toFixed(3) : '—'];
		}), 'Median of the runs\' mean latency at two revisions'));
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
		`Median of runs (all revisions) against the reference (${agg.reference})`));
}

async function benchmarks() {
	const section = document.getElementById('benchmarks');
	if (!section)
		return;
	const status = document.getElementById('bench-status');
	const endpoint = section.dataset.endpoint;
	let versions = [];
	try {
		versions = JSON.parse(section.dataset.versions || '[]');
	} catch { /* no names: short shas */ }
	try {
		const rows = (await getJSON(`${endpoint}/aggregate?by=revision`)).results || [];
		if (!rows.length) {
			status.textContent = 'No benchmark results yet.';
			return;
		}
		const name = revisionNamer(versions), revisions = revisionOrder(rows, versions);
		status.textContent = `${rows.reduce((n, r) => n + r.count, 0)} results at ${revisions.length} ` +
			(revisions.length === 1 ? 'revision.' : 'revisions.');
		latencyChart(rows, name);
		historyChart(rows, revisions, name);
		compare(rows, revisions, name);
		await speedup(endpoint);
	} catch (err) {
		status.textContent = `Benchmarks could not be loaded: ${err.message}`;
	}
}

// "2026-11-28" -> seconds at that UTC midnight.
const dayStart = (day) => Date.parse(`${day}T00:00:00Z`) / 1000;
const dayLabel = (t) => new Date(t * 1000).toLocaleDateString('en', { month: 'short', day: 'numeric', timeZone: 'UTC' });

// A point per day of the range (the API sends every day, 0 included), at
// the middle of the day; the x axis spans exactly the range's days.
function downloadsChart(box, d, variants) {
	const days = variants[0].days.map((x) => x.day);
	const mids = days.map((day) => dayStart(day) + 43200);
	const from = dayStart(days[0]), to = dayStart(days[days.length - 1]) + 86400;
	const width = chartWidth(box);
	const lab = xLabels(mids.map(dayLabel), width - 70);
	const top = Math.max(0, ...variants.flatMap((v) => v.days.map((x) => x.count)));
	const series = [{ label: 'Day', value: (u, v) => (v == null ? '' : dayLabel(v)) }];
	// every other line dashed: where two variants have the same counts both show
	variants.forEach((v, i) => series.push({ label: v.variant, stroke: colour(i), width: 2, dash: i % 2 ? [6, 4] : undefined,
		points: { show: days.length <= 62, size: days.length <= 7 ? 10 : 6, fill: colour(i) }, value: (u, n) => (n == null ? '—' : `${n}/day`) }));
	box.replaceChildren();
	new uPlot({
		width, height: 280 + lab.size - 30, series,
		scales: { x: { time: true, range: () => [from, to] }, y: { range: () => yRange(top) } },
		axes: [
			{ ...axisColours(), splits: () => lab.shown.map((i) => mids[i]), values: (u, splits) => splits.map(dayLabel), rotate: lab.rotate,
				size: lab.size, font: FONT },
			{ ...axisColours(), label: 'downloads/day', font: FONT, labelFont: FONT, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000,
				2000, 5000, 10000, 20000, 50000, 100000, 1e6, 1e7], size: 56 },
		],
		hooks: { draw: [(u) => describe(box, u, { unit: 'downloads/day', colours: {}, labelWidth, model: { kind: 'days',
			days, series: variants.map((v, i) => ({ label: v.variant, colour: colour(i),
				points: v.days.map((x, j) => ({ day: x.day, count: x.count, at: u.valToPos(mids[j], 'x') })) })) } })] },
	}, [mids, ...variants.map((v) => v.days.map((x) => x.count))], box);
	box.setAttribute('role', 'img');
	box.setAttribute('aria-label', `Downloads per day over ${d.days} days, one line per variant`);
	numbers(box, 'downloads-table', ['Day', ...variants.map((v) => v.variant)],
		days.map((day, j) => [day, ...variants.map((v) => String(v.days[j].count))]), 'Downloads per day (UTC)');
}

async function downloads() {
	const section = document.getElementById('downloads');
	if (!section)
		return;
	const box = document.getElementById('chart-downloads');
	const range = document.getElementById('dl-days');
	const show = async () => {
		try {
			const d = await getJSON(`${section.dataset.endpoint}?days=${range.value}`);
			const variants = (d.variants || []).filter((v) => v.total > 0);
			box.dataset.series = String(variants.length);
			box.dataset.days = String(d.days);
			if (!variants.length) {
				box.replaceChildren(el('p', { class: 'muted' }, `No downloads in the last ${d.days} days.`));
				delete box.dataset.chart;
				document.getElementById('downloads-table')?.closest('details').remove();
				return;
			}
			if (!unavailable(box))
				downloadsChart(box, d, variants);
		} catch (err) {
			box.replaceChildren(el('p', { class: 'problem' }, `Downloads could not be loaded: ${err.message}`));
		}
	};
	range.addEventListener('change', show);
	await show();
}

// The kernel page's "Compare on the farm": the server-rendered table's
// medians and min-max (data-compare) as grouped bars, base and head side by
// side per device and workload (web/pages_bench_compare.c).
function farmCompare() {
	const box = document.getElementById('chart-farm-compare');
	if (!box)
		return;
	let d;
	try {
		d = JSON.parse(box.dataset.compare);
	} catch {
		return;
	}
	groupedBars(box, { groups: d.rows.map((r) => r.group), names: [d.base, d.head], xName: 'Device · workload',
		yLabel: 'ms (median of runs)', stats: [d.rows.map((r) => r.base), d.rows.map((r) => r.head)],
		label: `Median latency of ${d.base} and ${d.head} per device and workload, whiskers min to max` });
}

benchmarks();
downloads();
farmCompare();
