// kernel_charts.mjs -- the kernel page's benchmark and download charts tell
// the truth (issue 35), in Debian's chromium driven by playwright-core
// against a real khub (started by tests/integration/t0274-kernel-charts.sh).
// Published here through the API: acme/one (one version, runs on 1 GPU,
// downloads today by a loader's GETs) and acme/four (v1..v3, runs on 4 GPUs;
// 60 days of downloads with gaps, written into PostgreSQL's download_counts
// with psql since the API only counts today). Then, from what each chart
// says it drew (data-chart), the canvas pixels, the legend and the tables:
// separate bars per GPU with legend colours that match, no bar cut at the
// edges, y from 0, versions named, spread = the submitted runs' min/max, a
// point per day of the range with zeros, a 1-day range one day wide, x
// labels that do not overlap at 1366 and 390 px. TAP out; screenshots
// under $ARTIFACTS.
import { chromium } from "playwright-core";
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { ok, test, diag, done, bailOut } from "../js/tap.mjs";

const URL_ = process.env.KHUB_URL, ROOT = process.env.ROOT_TOKEN, PG = process.env.PG_CONN;
const ARTIFACTS = process.env.ARTIFACTS || "tests/web/artifacts";
mkdirSync(ARTIFACTS, { recursive: true });

const b64 = (s) => Buffer.from(s).toString("base64");
async function must(method, path, { json, body, type, ua } = {}) {
	const headers = { Authorization: `Bearer ${ROOT}` };
	if (ua) headers["User-Agent"] = ua;
	if (json !== undefined) {
		headers["Content-Type"] = "application/json";
		body = JSON.stringify(json);
	} else if (type) headers["Content-Type"] = type;
	const res = await fetch(`${URL_}${path}`, { method, headers, body });
	const text = await res.text();
	if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 200)}`);
	try { return JSON.parse(text); } catch { return text; }
}

// ---- publish ------------------------------------------------------------------------------------
const metadata = (backend) => JSON.stringify({ id: "k", name: "k", version: 1, license: "apache-2.0",
	"python-depends": [], backend: { type: backend } }) + "\n";
const variant = (v, backend) => ({ [`build/${v}/__init__.py`]: "x = 1\n", [`build/${v}/metadata.json`]: metadata(backend) });
async function commit(repo, files, summary) {
	const lines = [JSON.stringify({ key: "header", value: { summary, description: "" } })];
	for (const [path, content] of Object.entries(files))
		lines.push(JSON.stringify({ key: "file", value: { path, content: b64(content), encoding: "base64" } }));
	await must("POST", `/api/kernels/${repo}/commit/main`, { body: lines.join("\n") + "\n", type: "application/x-ndjson" });
}
// A version: a commit on main, then branch vN at it; its sha.
async function version(repo, n, files) {
	await commit(repo, files, `v${n}`);
	await must("POST", `/api/kernels/${repo}/branch/v${n}`, { json: {} });
	return (await must("GET", `/api/kernels/${repo}/revision/v${n}`)).sha;
}

const WORKLOADS = ["Relu.small", "Relu.large", "Relu.reference"];
const submitted = [];	// {repo, sha, gpu, workload, mean}
async function runs(repo, sha, gpu, backend, means) {
	for (const base of means) {
		const results = WORKLOADS.map((workload, i) => {
			const mean = Number((base * (i + 1)).toFixed(6));
			submitted.push({ repo, sha, gpu, workload, mean });
			return { workload, timingResults: { mean_ms: mean, std_ms: 0.01, min_ms: mean * 0.9, max_ms: mean * 1.1,
				q1_ms: mean, q3_ms: mean, iqr_ms: 0, outliers: 0, iterations: 100 } };
		});
		await must("POST", `/api/kernels/${repo}/benchmarks`, { json: { results, kernelCommitSha: sha,
			machineInfo: { gpu, backend, pytorchVersion: "2.11.0", os: "Linux", cpu: "x86_64" },
			benchmarkScriptPath: "benchmarks/benchmark.py" } });
	}
}

const GPUS = [["NVIDIA H100", "CUDA 12.8", 1.0], ["NVIDIA L4", "CUDA 12.8", 3.1], ["NVIDIA A100", "CUDA 12.8", 1.6],
	["AMD MI300X", "ROCm 7.1", 1.3]];
const SHA = {};
const day = (ago) => new Date(Date.now() - ago * 86400000).toISOString().slice(0, 10);
const EXPECT = { one: new Map(), four: new Map() };	// variant -> Map(day -> count)
const LOADER = "kernels/0.15.2; hf_hub/1.29.0; python/3.11.2; torch/2.11.0";

async function publish() {
	await must("POST", "/api/repos/create", { json: { name: "one", organization: "acme", type: "kernel" } });
	SHA.one = { v1: await version("acme/one", 1, variant("torch-cpu", "cpu")) };
	await runs("acme/one", SHA.one.v1, "NVIDIA H100", "CUDA 12.8", [1.0, 1.25, 0.9]);
	// downloads today: a loader's GET (one counts per address and hour)
	await must("GET", "/kernels/acme/one/resolve/v1/build/torch-cpu/metadata.json", { ua: LOADER });
	await must("POST", "/api/repos/create", { json: { name: "four", organization: "acme", type: "kernel" } });
	SHA.four = {};
	for (const n of [1, 2, 3]) {
		SHA.four[`v${n}`] = await version("acme/four", n, { ...variant("torch-cpu", "cpu"),
			...variant("torch211-cxx11-cu128-x86_64-linux", "cuda"), [`v${n}.txt`]: `${n}\n` });
		for (const [gpu, backend, scale] of GPUS)
			await runs("acme/four", SHA.four[`v${n}`], gpu, backend, [1, 1.2, 0.85, 1.07].map((f) => scale * f / n));
	}
	// 60 days with gaps: days 10..19 ago and every third day have none
	const repo = execFileSync("psql", [PG, "-tAc", "SELECT id FROM repos WHERE name = 'four'"]).toString().trim();
	const values = [];
	for (const v of ["torch-cpu", "torch211-cxx11-cu128-x86_64-linux"]) {
		const m = new Map();
		for (let ago = 0; ago < 60; ago++) {
			if ((ago >= 10 && ago < 20) || ago % 3 === 1 || (v === "torch-cpu" && ago % 2))
				continue;
			m.set(day(ago), ago + 1);
			values.push(`(${repo}, '${day(ago)}', '${v}', '0.15.2', '2.11.0', '', ${ago + 1})`);
		}
		EXPECT.four.set(v, m);
	}
	execFileSync("psql", [PG, "-qc", `INSERT INTO download_counts (repo_id, day, variant, kernels_version,
		torch_version, backend, count) VALUES ${values.join(", ")}`]);
	for (let i = 0; i < 100 && (await must("GET", "/api/kernels/acme/one/downloads?days=1")).total < 1; i++)
		await new Promise((r) => setTimeout(r, 100));	// the server flushes counts every 200 ms
	EXPECT.one.set("torch-cpu", new Map([[day(0), 1]]));
}

// ---- what the runs say ------------------------------------------------------------------------------
function spread(repo, sha, gpu, workload) {
	const xs = submitted.filter((s) => s.repo === repo && s.sha === sha && s.gpu === gpu && s.workload === workload)
		.map((s) => s.mean).sort((a, b) => a - b);
	const q = (p) => {	// percentile_cont: linear between the closest ranks
		const at = p * (xs.length - 1), lo = Math.floor(at), hi = Math.ceil(at);
		return xs[lo] + (xs[hi] - xs[lo]) * (at - lo);
	};
	return { min: xs[0], max: xs[xs.length - 1], p25: q(0.25), median: q(0.5), p75: q(0.75), count: xs.length };
}
const close = (a, b) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b));
const fmt = (v) => Number(v).toPrecision(4);

// ---- the browser ------------------------------------------------------------------------------------
try {
	await publish();
	ok(true, "published acme/one (1 GPU, v1) and acme/four (4 GPUs, v1..v3) with runs and downloads");
} catch (e) {
	bailOut(e);
}
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
	args: ["--no-sandbox"] });

async function open(repo, width) {
	const ctx = await browser.newContext({ baseURL: URL_, viewport: { width, height: width > 800 ? 900 : 844 },
		deviceScaleFactor: 1 });
	const page = await ctx.newPage();
	const errors = [];
	page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));
	page.on("console", (m) => { if (m.type() === "error") errors.push(`console: ${m.text()}`); });
	page.setDefaultTimeout(15000);
	await page.goto(`/kernels/${repo}`);
	for (const id of ["chart-latency", "chart-history", "chart-downloads"])
		await page.waitForSelector(`#${id} canvas`).catch(() => errors.push(`#${id} drew nothing`));
	return { ctx, page, errors };
}
// What the chart says it drew; a test fails when it says nothing.
async function model(page, id) {
	const text = await page.evaluate((i) => document.getElementById(i).dataset.chart, id);
	if (!text)
		throw new Error(`#${id} does not say what it drew (no data-chart)`);
	return JSON.parse(text);
}
async function pickDays(page, days) {
	await page.evaluate(() => delete document.getElementById("chart-downloads").dataset.chart);
	await page.selectOption("#dl-days", String(days));
	await page.waitForSelector("#chart-downloads[data-chart]", { timeout: 15000 });
}
async function shot(page, selector, name) {
	await page.locator(selector).screenshot({ path: `${ARTIFACTS}/${name}.png` });
}
const hex = (c) => { const n = parseInt(c.slice(1), 16); return [n >> 16, (n >> 8) & 255, n & 255]; };

// Bars: separate per series, inside the plot, from 0; legend colours and
// the canvas pixel at each bar's middle are the series' colour.
async function barProblems(page, id, want) {
	const m = await model(page, id), problems = [];
	if (m.series.length !== want) problems.push(`${id}: ${m.series.length} series, want ${want}`);
	if (m.y.min !== 0) problems.push(`${id}: y starts at ${m.y.min}`);
	const all = m.series.flatMap((s, i) => s.bars.map((b) => ({ ...b, s: i }))).sort((a, b) => a.x0 - b.x0);
	for (let i = 0; i < all.length; i++) {
		const b = all[i];
		if (!(b.x1 > b.x0)) problems.push(`${id}: an empty bar ${JSON.stringify(b)}`);
		if (b.x0 < 0 || b.x1 > m.plot.width || b.top < 0) problems.push(`${id}: bar cut at the edge ${JSON.stringify(b)}`);
		if (i && all[i - 1].x1 > b.x0) problems.push(`${id}: bars of series ${all[i - 1].s} and ${b.s} overlap`);
	}
	const legend = await page.$$eval(`#${id} .u-legend .u-series`, (rows) => rows.map((r) => ({
		label: r.querySelector(".u-label")?.textContent,
		bg: r.querySelector(".u-marker") ? getComputedStyle(r.querySelector(".u-marker")).backgroundColor : null })));
	const keyed = legend.filter((l) => m.series.some((s) => s.label === l.label));
	if (keyed.length !== m.series.length) problems.push(`${id}: legend ${JSON.stringify(legend)}`);
	for (const s of m.series) {
		const l = keyed.find((k) => k.label === s.label);
		if (l && l.bg !== `rgb(${hex(s.colour).join(", ")})`) problems.push(`${id}: legend ${s.label} ${l.bg}, bars ${s.colour}`);
	}
	const pixels = await page.evaluate(({ i, m }) => {
		const box = document.getElementById(i), canvas = box.querySelector("canvas");
		const over = box.querySelector(".u-over").getBoundingClientRect(), c = canvas.getBoundingClientRect();
		const ctx = canvas.getContext("2d"), r = canvas.width / c.width;
		return m.series.map((s) => s.bars.map((b) => {
			const x = (over.left - c.left + (b.x0 + b.x1) / 2) * r, y = (over.top - c.top + m.plot.height - 2) * r;
			return [...ctx.getImageData(Math.round(x), Math.round(y), 1, 1).data.slice(0, 3)];
		}));
	}, { i: id, m });
	m.series.forEach((s, i) => pixels[i].forEach((px, j) => {
		if (px.some((v, k) => Math.abs(v - hex(s.colour)[k]) > 8))
			problems.push(`${id}: bar ${j} of ${s.label} shows rgb(${px}) not ${s.colour} (hidden behind another?)`);
	}));
	return { m, problems };
}

// x labels: none overlaps its neighbour.
function labelProblems(id, m) {
	const problems = [];
	for (let i = 1; i < m.xLabels.length; i++) {
		const a = m.xLabels[i - 1], b = m.xLabels[i];
		const need = m.xRotate ? 14 : (a.width + b.width) / 2 + 2;
		if (b.at - a.at < need) problems.push(`${id}: labels "${a.text}" and "${b.text}" ${(b.at - a.at).toFixed(1)} px apart`);
	}
	return problems;
}

// Spread and medians of the latency chart and its table against the runs.
async function spreadProblems(page, repo, sha) {
	const m = await model(page, "chart-latency"), problems = [];
	for (const s of m.series)
		for (const b of s.bars) {
			const want = spread(repo, sha, s.label, m.groups[b.group]);
			if (!close(b.min, want.min) || !close(b.max, want.max) || !close(b.median, want.median))
				problems.push(`${s.label} ${m.groups[b.group]}: drawn ${b.median} [${b.min}, ${b.max}], runs ${JSON.stringify(want)}`);
		}
	const rows = await page.$$eval("#latency-table tbody tr", (trs) => trs.map((tr) => [...tr.children].map((c) => c.textContent)));
	for (const [workload, gpu, count, median, min, p25, p75, max] of rows) {
		const w = spread(repo, sha, gpu, workload);
		const got = [count, median, min, p25, p75, max].join(" "), exp = [w.count, ...[w.median, w.min, w.p25, w.p75, w.max].map(fmt)].join(" ");
		if (got !== exp) problems.push(`table ${workload} ${gpu}: ${got}, runs ${exp}`);
	}
	if (rows.length !== m.series.reduce((n, s) => n + s.bars.length, 0)) problems.push(`${rows.length} table rows`);
	return problems;
}

// A point per day of the range, zeros included, the x axis exactly those days.
async function downloadProblems(page, repo, days) {
	await pickDays(page, days);
	const m = await model(page, "chart-downloads"), problems = [];
	const want = [...Array(days).keys()].reverse().map(day);
	if (JSON.stringify(m.days) !== JSON.stringify(want)) problems.push(`days ${m.days[0]}..${m.days.at(-1)} (${m.days.length})`);
	if (m.x.max - m.x.min !== days * 86400) problems.push(`x spans ${(m.x.max - m.x.min) / 86400} days, want ${days}`);
	if (m.y.min !== 0) problems.push(`y starts at ${m.y.min}`);
	const expect = EXPECT[repo.split("/")[1]];
	if (m.series.length !== expect.size) problems.push(`${m.series.length} series, want ${expect.size}`);
	for (const s of m.series) {
		const e = expect.get(s.label) || new Map();
		const got = s.points.map((p) => `${p.day}=${p.count}`).join(" "), exp = want.map((d) => `${d}=${e.get(d) || 0}`).join(" ");
		if (got !== exp) problems.push(`${s.label}: ${got.slice(0, 200)} want ${exp.slice(0, 200)}`);
		if (s.points.some((p) => p.at < 0 || p.at > m.plot.width)) problems.push(`${s.label}: a point outside the plot`);
	}
	const rows = await page.$$eval("#downloads-table tbody tr", (trs) => trs.length);
	if (rows !== days) problems.push(`table ${rows} rows, want ${days}`);
	return [...problems, ...labelProblems("chart-downloads", m)];
}

for (const width of [1366, 390]) {
	const four = await open("acme/four", width);
	await test(`${width} px, 4 GPUs: latency bars per GPU separate, inside the plot, legend colours = bar colours, y from 0`,
		async () => { const { m, problems } = await barProblems(four.page, "chart-latency", 4);
			return [...problems, ...labelProblems("chart-latency", m)]; });
	await test(`${width} px, 4 GPUs: bar = median, whisker and table min/max/p25/p75 = the submitted runs at v3`,
		() => spreadProblems(four.page, "acme/four", SHA.four.v3));
	await test(`${width} px, 3 versions: the history axis and the compare menus say v1, v2, v3`, async () => {
		const { m, problems } = await barProblems(four.page, "chart-history", 3);
		const labels = m.xLabels.map((l) => l.text).join(",");
		if (labels !== (width > 800 ? "v1,v2,v3" : labels) || !/^v1(,v2)?,v3$/.test(labels)) problems.push(`history labels ${labels}`);
		if (m.groups.join(",") !== "v1,v2,v3") problems.push(`history groups ${m.groups}`);
		for (const sel of ["#cmp-a", "#cmp-b"]) {
			const opts = await four.page.$$eval(`${sel} option`, (os) => os.map((o) => o.textContent));
			if (!/^v1 \(\w{7}\),v2 \(\w{7}\),v3 \(\w{7}\)$/.test(opts.join(","))) problems.push(`${sel}: ${opts}`);
		}
		const head = await four.page.$$eval("#bench-compare-table th[scope=col]", (ths) => ths.map((t) => t.textContent));
		if (!head.includes("v2 median (ms)") || !head.includes("v3 min–max")) problems.push(`compare head ${head}`);
		return [...problems, ...labelProblems("chart-history", m)];
	});
	await four.page.locator("#benchmarks").scrollIntoViewIfNeeded();
	await shot(four.page, "#benchmarks", `charts-four-gpus-versions-${width}`);
	for (const id of ["chart-latency", "chart-history"])
		await shot(four.page, `#${id}`, `charts-four-gpus-${id}-${width}`);
	await test(`${width} px, 60 days with gaps in a 90-day range: a point per day, zeros included, y from 0`,
		() => downloadProblems(four.page, "acme/four", 90));
	await shot(four.page, "#downloads", `charts-downloads-60d-${width}`);
	await test(`${width} px, the page runs without script errors or CSP violations`, async () => four.errors.slice(0, 5));
	await four.ctx.close();

	const one = await open("acme/one", width);
	await test(`${width} px, 1 GPU, 1 version: one series of bars, inside the plot, spread = the runs`, async () => {
		const { m, problems } = await barProblems(one.page, "chart-latency", 1);
		const h = await barProblems(one.page, "chart-history", 3);
		if (h.m.groups.join(",") !== "v1") problems.push(`history groups ${h.m.groups}`);
		return [...problems, ...h.problems, ...labelProblems("chart-latency", m), ...await spreadProblems(one.page, "acme/one", SHA.one.v1)];
	});
	await shot(one.page, "#benchmarks", `charts-one-gpu-one-version-${width}`);
	await test(`${width} px, downloads of one day in a 1-day range: one point, the x axis one day wide`,
		() => downloadProblems(one.page, "acme/one", 1));
	await shot(one.page, "#downloads", `charts-downloads-1d-${width}`);
	await test(`${width} px, ... and in the 30-day range the other 29 days are 0`, () => downloadProblems(one.page, "acme/one", 30));
	await test(`${width} px, acme/one runs without script errors or CSP violations`, async () => one.errors.slice(0, 5));
	await one.ctx.close();
}
diag(`screenshots in ${ARTIFACTS}`);
await browser.close();
done();
