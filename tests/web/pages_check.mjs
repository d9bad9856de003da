// pages_check.mjs -- every page kind of the web UI's page table, checked for
// looks and accessibility in Debian's chromium (headless, playwright-core):
// at 1366x900 and 390x844 (a phone), in the light and the dark colour scheme,
// axe-core finds no violation and the page has no horizontal scroll (its
// width fits the viewport; wide tables and code scroll inside their own
// focusable regions). The page kinds come from `khub routes --pages --json`
// (ROUTES_JSON): a GET pattern this file has no sample URL for fails the run,
// named, so a page added later is covered or noticed. Screenshots under
// $ARTIFACTS/pages/<kind>-<width>-<scheme>.png. TAP out. Started by
// tests/integration/t0278-web-pages-look.sh.
import { chromium } from "playwright-core";
import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { ok, test, diag, done, bailOut } from "../js/tap.mjs";

const URL_ = process.env.KHUB_URL;
const ROOT = process.env.ROOT_TOKEN;
const ARTIFACTS = `${process.env.ARTIFACTS || "tests/web/artifacts"}/pages`;
const ROUTES = JSON.parse(readFileSync(process.env.ROUTES_JSON, "utf8"));
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
mkdirSync(ARTIFACTS, { recursive: true });

// One row per GET pattern of the page table: the page kinds to open there
// (kind name, URL, signed in or not), or why it is not an HTML page (then
// its sample must not answer HTML). A new page adds a row here.
const README = ["# relu", "", "A ReLU kernel. See [usage](#usage).", "", "## Usage", "",
	"```python", "import torch  # the kernel", "from kernels import get_kernel", "relu = get_kernel(\"acme/relu\")",
	"y = relu.relu(torch.randn(4096, device=\"cuda\"), inplace=False, out=None, stream=None, alpha=1.0, beta=0.0)", "```", "",
	"```cuda", "__global__ void relu(const float *x, float *y, int n) {", "\tint i = blockIdx.x * blockDim.x + threadIdx.x;",
	"\tif (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f; // clamp", "}", "```", "",
	"```sh", "pip install kernels && export HF_ENDPOINT=http://localhost:8080 # hub", "```", "",
	"```json", "{\"id\": \"relu\", \"version\": 1, \"ok\": true, \"python-depends\": []}", "```", "",
	"```toml", "[general]", "name = \"relu\" # the name", "version = 1", "```", "",
	"## Usage", "", "The same heading again.", "", "## Support", "",
	"| op | dtype | speed on an H100 with a long column name | notes that go on for a while so the table is wide |",
	"|----|-------|------|------|", "| relu | float32 | fast | a_very_long_identifier_that_does_not_wrap_anywhere_at_all_in_a_cell |", "",
	"- [x] CUDA", "- [ ] Metal", ""].join("\n");
const SAMPLES = {
	"/": [{ kind: "home", url: "/" }],
	"/-/static/{path*}": { notHtml: "a static file", url: "/-/static/khub.css" },
	"/favicon.ico": { notHtml: "an icon", url: "/favicon.ico" },
	"/login": [{ kind: "login", url: "/login", anonymous: true }],
	"/kernels": [{ kind: "kernels", url: "/kernels" }, { kind: "kernels-anonymous", url: "/kernels", anonymous: true }],
	"/kernels/{ns}/{name}": [{ kind: "kernel", url: "/kernels/acme/relu" },
		{ kind: "error-404", url: "/kernels/acme/nope" }],
	"/kernels/{ns}/{name}/tree/{rev}/{path*}": [{ kind: "tree", url: "/kernels/acme/relu/tree/main/build" }],
	"/kernels/{ns}/{name}/commits/{rev}/{path*}": [{ kind: "commits", url: "/kernels/acme/relu/commits/main" }],
	"/kernels/{ns}/{name}/blob/{rev}/{path*}": [{ kind: "blob", url: "/kernels/acme/relu/blob/main/build/torch-cpu/__init__.py" },
		{ kind: "blob-markdown", url: "/kernels/acme/relu/blob/main/README.md" }],
	"/kernels/{ns}/{name}/commit/{rev}": [{ kind: "commit", url: async (page) => {
		await page.goto("/kernels/acme/relu/commits/main");
		return page.getAttribute("a.commit-title", "href");
	} }],
	"/kernels/{ns}/{name}/builds": [{ kind: "builds", url: "/kernels/acme/relu/builds" }],
	"/kernels/{ns}/{name}/builds/{arg}/log": [{ kind: "build-log-missing", url: "/kernels/acme/relu/builds/999999/log" }],
	// a live build's log as server-sent events: needs a running build (t0296, t0297 follow one)
	"/kernels/{ns}/{name}/builds/{arg}/log/events": { notHtml: "text/event-stream", url: null },
	"/kernels/{ns}/{name}/-/variants": { notHtml: "JSON", url: "/kernels/acme/relu/-/variants" },
	"/kernels/{ns}/{name}/-/benchmarks": { notHtml: "JSON", url: "/kernels/acme/relu/-/benchmarks" },
	"/kernels/{ns}/{name}/-/benchmarks/aggregate": { notHtml: "JSON", url: "/kernels/acme/relu/-/benchmarks/aggregate" },
	"/kernels/{ns}/{name}/-/downloads": { notHtml: "JSON", url: "/kernels/acme/relu/-/downloads" },
	"/kernels/{ns}/{name}/-/resolve/{rev}/{path*}": { notHtml: "a repo file", url: "/kernels/acme/relu/-/resolve/main/README.md" },
	"/kernels/{ns}/{name}/settings": [{ kind: "repo-settings", url: "/kernels/acme/relu/settings" }],
	"/settings/tokens": [{ kind: "tokens", url: "/settings/tokens" }],
	"/settings/tokens/revoke": [{ kind: "token-revoke", url: async (page) => {
		await page.goto("/settings/tokens");
		return page.getAttribute("a[href^='/settings/tokens/revoke?id=']", "href");
	} }],
	"/admin": [{ kind: "admin", url: "/admin" }],
	"/admin/airgap": [{ kind: "admin-airgap", url: "/admin/airgap" }],
	"/{org}": [{ kind: "org", url: "/acme" }],
};
const VIEWPORTS = [{ width: 1366, height: 900 }, { width: 390, height: 844 }];
const SCHEMES = ["light", "dark"];

const b64 = (s) => Buffer.from(s).toString("base64");
async function api(method, path, { json, body, type } = {}) {
	const headers = { Authorization: `Bearer ${ROOT}` };
	if (json !== undefined) {
		headers["Content-Type"] = "application/json";
		body = JSON.stringify(json);
	} else if (type) headers["Content-Type"] = type;
	const res = await fetch(`${URL_}${path}`, { method, headers, body });
	const text = await res.text();
	if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 200)}`);
	return text ? JSON.parse(text) : null;
}
async function publish() {
	await api("POST", "/api/repos/create", { json: { name: "relu", organization: "acme", type: "kernel" } });
	const meta = (b) => JSON.stringify({ id: "relu", name: "relu", version: 1, license: "apache-2.0",
		"python-depends": [], backend: { type: b } });
	const files = { "README.md": README };
	for (const [v, b] of [["torch-cpu", "cpu"], ["torch211-cxx11-cu128-x86_64-linux", "cuda"],
		["torch211-cxx11-rocm71-x86_64-linux", "rocm"], ["torch212-cxx11-cu130-aarch64-linux", "cuda"]]) {
		files[`build/${v}/__init__.py`] = "def relu(x):\n    return x\n";
		files[`build/${v}/metadata.json`] = meta(b);
	}
	const lines = [JSON.stringify({ key: "header", value: { summary: "relu: variants and a README", description: "" } })];
	for (const [path, content] of Object.entries(files))
		lines.push(JSON.stringify({ key: "file", value: { path, content: b64(content), encoding: "base64" } }));
	await api("POST", "/api/kernels/acme/relu/commit/main", { body: lines.join("\n") + "\n", type: "application/x-ndjson" });
	await api("POST", "/api/kernels/acme/relu/branch/v1", { json: {} });
	const sha = (await api("GET", "/api/kernels/acme/relu/revision/v1")).sha;
	for (const [gpu, scale] of [["NVIDIA H100", 1.0], ["NVIDIA A100", 1.6]])
		await api("POST", "/api/kernels/acme/relu/benchmarks", { json: {
			results: ["Relu.small", "Relu.large", "Relu.reference"].map((w, i) => ({ workload: w, timingResults: {
				mean_ms: (i + 1) * scale, std_ms: 0.01, min_ms: (i + 1) * scale, max_ms: (i + 1) * scale, q1_ms: (i + 1) * scale,
				q3_ms: (i + 1) * scale, iqr_ms: 0, outliers: 0, iterations: 100 } })),
			machineInfo: { gpu, backend: "CUDA 12.8", pytorchVersion: "2.11.0", os: "Linux", cpu: "x86_64" },
			kernelCommitSha: sha, benchmarkScriptPath: "benchmarks/benchmark.py" } });
}

// Every GET pattern of the page table has a row here.
function pageKinds() {
	const missing = [], kinds = [], notHtml = [];
	for (const r of ROUTES.filter((r) => r.methods.includes("GET"))) {
		const row = SAMPLES[r.pattern];
		if (!row) missing.push(r.pattern);
		else if (row.notHtml) notHtml.push(row);
		else kinds.push(...row);
	}
	return { missing, kinds, notHtml };
}

// The page's problems at this size and scheme: axe's violations, a page
// wider than the viewport (and the elements that stick out).
async function checkPage(page, width) {
	const problems = [];
	await page.evaluate(AXE);	// not a script tag: the page's CSP allows none inline
	const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
	for (const v of result.violations)
		problems.push(`axe ${v.id} (${v.impact}) x${v.nodes.length}: ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", ")}`);
	const wide = await page.evaluate((w) => {
		const out = [];
		const clipped = (el) => {	// inside a region that scrolls on its own
			for (let p = el.parentElement; p && p !== document.body; p = p.parentElement)
				if (getComputedStyle(p).overflowX !== "visible") return true;
			return false;
		};
		for (const el of document.body.querySelectorAll("*")) {
			if (clipped(el)) continue;
			const r = el.getBoundingClientRect();
			if (r.right > w + 1 && out.length < 4) out.push(`${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""}${el.className && typeof el.className === "string" ? "." + el.className.split(" ")[0] : ""} to ${Math.round(r.right)}px`);
		}
		return { scroll: document.documentElement.scrollWidth, body: document.body.scrollWidth, out };
	}, width);
	if (Math.max(wide.scroll, wide.body) > width)
		problems.push(`${Math.max(wide.scroll, wide.body)} px wide at ${width} px: ${wide.out.join(", ")}`);
	return problems;
}

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
let signedIn;
try {
	await publish();
	const ctx = await browser.newContext({ baseURL: URL_ });
	const page = await ctx.newPage();
	await page.goto("/login");
	await page.fill("#token", ROOT);
	await Promise.all([page.waitForURL(/\/kernels$/), page.click("form[action='/login'] button[type=submit]")]);
	signedIn = await ctx.storageState();
	await ctx.close();
	ok(true, "published a kernel (README with code, headings, a task list, a wide table; benchmarks) and signed in");
} catch (e) {
	bailOut(e);
}

const { missing, kinds, notHtml } = pageKinds();
ok(missing.length === 0, "every GET pattern of the page table has sample URLs in pages_check.mjs",
	missing.map((p) => `no sample URL for the page kind ${p}: add a row to SAMPLES`));
await test("the patterns said not to be pages answer no HTML", async () => {
	const problems = [];
	for (const row of notHtml.filter((r) => r.url)) {
		const res = await fetch(`${URL_}${row.url}`, { headers: { Authorization: `Bearer ${ROOT}` } });
		if ((res.headers.get("content-type") || "").includes("text/html")) problems.push(`${row.url} answers HTML`);
	}
	return problems;
});

for (const vp of VIEWPORTS)
	for (const scheme of SCHEMES) {
		const anon = await browser.newContext({ baseURL: URL_, viewport: vp, colorScheme: scheme });
		const user = await browser.newContext({ baseURL: URL_, viewport: vp, colorScheme: scheme, storageState: signedIn });
		// one tab per context, navigated from kind to kind: a new tab per
		// kind started a renderer process for each (most of the run's CPU)
		const tabs = { anon: await anon.newPage(), user: await user.newPage() };
		for (const k of kinds) {
			const page = k.anonymous ? tabs.anon : tabs.user;
			await test(`${k.kind} at ${vp.width}px, ${scheme}: axe finds no violation, no horizontal scroll`, async () => {
				const url = typeof k.url === "function" ? await k.url(page) : k.url;
				if (!url) return ["no sample URL found"];
				await page.goto(url);
				await page.waitForLoadState("networkidle");
				const problems = await checkPage(page, vp.width);
				await page.screenshot({ path: `${ARTIFACTS}/${k.kind}-${vp.width}-${scheme}.png`, fullPage: true });
				return problems;
			});
		}
		await anon.close();
		await user.close();
	}
diag(`${kinds.length} page kinds, ${VIEWPORTS.length} sizes, ${SCHEMES.length} colour schemes`);

// The README as a reader meets it: anchors, a working in-page link, a "#"
// link that shows on keyboard focus inside the box, highlighted code.
await test("README: heading ids and # links (shown on focus), labelled checkboxes, highlighted code", async () => {
	const ctx = await browser.newContext({ baseURL: URL_, storageState: signedIn });
	const page = await ctx.newPage();
	await page.goto("/kernels/acme/relu");
	const problems = [];
	const ids = await page.$$eval(".readme h1[id], .readme h2[id]", (hs) => hs.map((h) => h.id));
	if (JSON.stringify(ids) !== JSON.stringify(["relu", "usage", "usage-1", "support"])) problems.push(`heading ids ${ids}`);
	const anchor = page.locator(".readme a.anchor[href='#usage-1']");
	await anchor.focus();
	const seen = await anchor.evaluate((a) => {
		const r = a.getBoundingClientRect(), box = a.closest(".readme").getBoundingClientRect();
		return { opacity: getComputedStyle(a).opacity, inside: r.left >= box.left && r.right <= box.right, text: a.textContent };
	});
	if (seen.opacity !== "1" || !seen.inside || seen.text !== "#") problems.push(`focused # link: ${JSON.stringify(seen)}`);
	const names = await page.$$eval(".readme input[type=checkbox]", (cs) => cs.map((c) => c.labels[0]?.textContent.trim()));
	if (JSON.stringify(names) !== JSON.stringify(["CUDA", "Metal"])) problems.push(`checkbox labels ${names}`);
	const kinds = await page.$$eval(".readme pre.code code", (cs) => cs.map((c) => [c.className,
		[...new Set([...c.querySelectorAll("span")].map((s) => s.className))].sort().join(" ")]));
	for (const [lang, want] of [["python", "tok-com tok-kw tok-num tok-str"], ["cuda", "tok-com tok-kw tok-num"],
		["sh", "tok-com tok-kw tok-num"], ["json", "tok-key tok-kw tok-num tok-str"], ["toml", "tok-com tok-key tok-meta tok-num tok-str"]]) {
		const got = kinds.find(([c]) => c === `language-${lang}`);
		if (!got || got[1] !== want) problems.push(`${lang}: ${got ? got[1] : "no block"}`);
	}
	await page.click(".readme a[href='#usage']");
	if (!page.url().endsWith("#usage")) problems.push(`the in-page link went to ${page.url()}`);
	await ctx.close();
	return problems;
});

// Dark mode is real: the page's background follows the scheme.
await test("the dark scheme gives a dark page, the light one a light page", async () => {
	const problems = [];
	for (const scheme of SCHEMES) {
		const ctx = await browser.newContext({ baseURL: URL_, colorScheme: scheme });
		const page = await ctx.newPage();
		await page.goto("/kernels");
		const bg = await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
		const [r, g, b] = bg.match(/\d+/g).map(Number);
		const light = 0.2126 * r + 0.7152 * g + 0.0722 * b > 128;
		if (light !== (scheme === "light")) problems.push(`${scheme}: background ${bg}`);
		await ctx.close();
	}
	return problems;
});
await browser.close();
done();
