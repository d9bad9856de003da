// bench_compare.mjs -- the kernel page's "Compare on the farm" table and the
// listing sorted by a farm result, in Debian's chromium driven by
// playwright-core against a real khub whose farm runs
// tests/integration/t0318-web-bench-compare.sh seeded through the worker
// routes (acme/relu: v1 and v2, its newest 0.08 ms on the H200; acme/gelu 0.2 ms). At 1366x900 and 390x844: the
// table names the versions (never a SHA), shows both medians, min–max and
// the change, marks the regression; the form compares other sides; the
// table is there without JavaScript; nothing is wider than a phone's
// screen; axe finds nothing in them; the page's JS draws the table's
// medians and min–max as grouped bars (base and head per device and workload). TAP out; screenshots under $ARTIFACTS.
import { chromium } from "playwright-core";
import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { test, diag, done } from "../js/tap.mjs";

const URL_ = process.env.KHUB_URL;
const ARTIFACTS = process.env.ARTIFACTS || "tests/web/artifacts";
mkdirSync(ARTIFACTS, { recursive: true });
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
	args: ["--no-sandbox"] });

async function open(path, width, javaScriptEnabled = true) {
	const ctx = await browser.newContext({ baseURL: URL_, viewport: { width, height: width > 800 ? 900 : 844 },
		deviceScaleFactor: 1, javaScriptEnabled });
	const page = await ctx.newPage();
	const errors = [];
	page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));
	page.setDefaultTimeout(15000);
	await page.goto(path);
	return { ctx, page, errors };
}
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
// axe's violations inside selector (the rest of the page is t0278's).
async function axe(page, selector) {
	await page.evaluate(AXE);	// not a script tag: the page's CSP allows none inline
	const result = await page.evaluate((s) => window.axe.run(s, { resultTypes: ["violations"] }), selector);
	return result.violations.map((v) => `axe ${v.id} (${v.impact}) x${v.nodes.length}: ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", ")}`);
}
// The comparison table as text cells, row by row (header first).
const cells = (page) => page.$$eval("table.bench-compare-farm tr", (rows) =>
	rows.map((r) => [...r.children].map((c) => c.textContent.trim())));

for (const width of [1366, 390]) {
	await test(`${width} px: v1 against v2 per device and workload, named as versions, the regression marked`, async () => {
		const { ctx, page, errors } = await open("/kernels/acme/relu#compare", width);
		const problems = [...errors];
		const rows = await cells(page);
		const head = rows[0].join(" | ");
		if (head !== "Device | Workload | Change | v1 median | v1 min–max | v2 median | v2 min–max")
			problems.push(`header: ${head}`);
		if (/[0-9a-f]{7,}/.test(rows.flat().join(" ")))
			problems.push("a SHA in the table");
		const big = rows.find((r) => r[0] === "cpu" && r[1] === "Relu.big");
		if (!big || big[3] !== "1.01" || big[4] !== "1–1.02" || big[5] !== "1.5" || !/^\+48\.5% slower \(regression\)$/.test(big[2]))
			problems.push(`cpu Relu.big: ${big}`);
		const h200 = rows.find((r) => r[0] === "NVIDIA H200");
		if (!h200 || h200[2] !== "-20.0% faster")
			problems.push(`H200: ${h200}`);
		const marked = await page.$$eval("tr.regressed", (r) => r.length);
		if (marked !== 1)
			problems.push(`${marked} rows marked as regressions`);
		// readable on a phone: the page never wider than the screen, the
		// table scrolls in its own region, text no smaller than 12 px
		const geo = await page.evaluate(() => {
			const wrap = document.querySelector("#compare .table-wrap");
			const td = document.querySelector("table.bench-compare-farm td");
			return { page: document.documentElement.scrollWidth, view: window.innerWidth,
				overflow: getComputedStyle(wrap).overflowX, font: parseFloat(getComputedStyle(td).fontSize) };
		});
		if (geo.page > geo.view)
			problems.push(`the page is ${geo.page} px wide in a ${geo.view} px window`);
		if (!["auto", "scroll"].includes(geo.overflow))
			problems.push(`the table's region does not scroll (overflow-x ${geo.overflow})`);
		if (geo.font < 12)
			problems.push(`cells in ${geo.font} px`);
		problems.push(...await axe(page, "#compare"));
		// the chart: base and head bars per device and workload, the table's numbers
		await page.waitForSelector("#chart-farm-compare[data-chart]").catch(() => problems.push("no chart drawn"));
		const model = JSON.parse(await page.getAttribute("#chart-farm-compare", "data-chart") || "{}");
		const series = (model.series || []).map((x) => `${x.label}:${x.bars.length}`).join(" ");
		if (series !== "v1:4 v2:4")
			problems.push(`chart series ${series}`);
		const g = (model.groups || []).indexOf("cpu · Relu.big");
		const bar = model.series?.[1]?.bars.find((b) => b.group === g);
		if (!bar || bar.median !== 1.5 || bar.min !== 1.5 || bar.max !== 1.5)
			problems.push(`v2's cpu · Relu.big bar: ${JSON.stringify(bar)}`);
		if (model.y?.min !== 0)
			problems.push(`y from ${model.y?.min}`);
		await page.locator("#compare").screenshot({ path: `${ARTIFACTS}/bench-compare-${width}.png` });
		await ctx.close();
		return problems;
	});
}

await test("the form compares other sides: v2 against v1 (the change reversed)", async () => {
	const { ctx, page, errors } = await open("/kernels/acme/relu#compare", 1366);
	await page.selectOption("#cmp-base", "v2");
	await page.selectOption("#cmp-head", "v1");
	await Promise.all([page.waitForNavigation(), page.click("#compare button[type=submit]")]);
	const problems = [...errors];
	if (!/[?&]base=v2&head=v1/.test(page.url()))
		problems.push(`url ${page.url()}`);
	const big = (await cells(page)).find((r) => r[0] === "cpu" && r[1] === "Relu.big");
	if (!big || big[2] !== "-32.7% faster")
		problems.push(`cpu Relu.big: ${big}`);
	await ctx.close();
	return problems;
});

await test("without JavaScript the comparison is there (server-rendered)", async () => {
	const { ctx, page } = await open("/kernels/acme/relu?base=v1&head=v2", 390, false);
	const rows = await cells(page);
	await ctx.close();
	return rows.length === 5 ? [] : [`${rows.length} rows: ${JSON.stringify(rows)}`];
});

for (const width of [1366, 390]) {
	await test(`${width} px: /kernels sorted by Relu.big's farm result`, async () => {
		const { ctx, page, errors } = await open("/kernels?sort=bench&workload=Relu.big", width);
		const problems = [...errors];
		const ids = await page.$$eval("#kernels tbody tr", (r) => r.map((t) => t.dataset.id));
		if (ids.join(" ") !== "acme/relu acme/gelu")
			problems.push(`order ${ids}`);
		const text = await page.$$eval("#kernels .bench-result", (p) => p.map((x) => x.textContent));
		if (text.join(" / ") !== "Relu.big: 0.08 ms median on the farm / Relu.big: 0.2 ms median on the farm")
			problems.push(`result: ${text}`);
		const wide = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
		if (wide)
			problems.push("the listing is wider than the window");
		problems.push(...await axe(page, "main"));
		await page.screenshot({ path: `${ARTIFACTS}/bench-sort-${width}.png`, fullPage: true });
		await ctx.close();
		return problems;
	});
}

await browser.close();
diag(`screenshots in ${ARTIFACTS}`);
done();
