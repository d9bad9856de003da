// find_kernels.mjs -- finding kernels and the kernel page, in Debian's
// chromium (headless) driven by playwright-core, against a real khub started
// by tests/integration/t0258-web-find-kernels.sh: README front matter shown
// as a card (not as body text), the listing's description, tags and license,
// search over descriptions, tags and README text (API and page, one rule,
// never a private README for a non-member), the metadata-invalid reason, a
// compliance badge that agrees with its rows, snippets in keyboard-scrollable
// regions, a shorter page, and "Will it load for me?" without JavaScript
// (Metal on macOS). TAP out; screenshots under $ARTIFACTS.
import { chromium } from "playwright-core";
import { mkdirSync, readFileSync } from "node:fs";
import { ok, test, diag, done, bailOut } from "../js/tap.mjs";

const URL_ = process.env.KHUB_URL;
const ROOT = process.env.ROOT_TOKEN, ALICE = process.env.ALICE_TOKEN, EVE = process.env.EVE_TOKEN;
const ARTIFACTS = process.env.ARTIFACTS || "tests/web/artifacts";
mkdirSync(ARTIFACTS, { recursive: true });

const b64 = (s) => Buffer.from(s).toString("base64");
async function api(method, path, { token, json, body, type } = {}) {
	const headers = {};
	if (token) headers.Authorization = `Bearer ${token}`;
	if (json !== undefined) {
		headers["Content-Type"] = "application/json";
		body = JSON.stringify(json);
	} else if (type) headers["Content-Type"] = type;
	const res = await fetch(`${URL_}${path}`, { method, headers, body, redirect: "manual" });
	const text = await res.text();
	let data = null;
	try { data = JSON.parse(text); } catch { /* not JSON */ }
	return { status: res.status, headers: res.headers, text, data };
}
async function must(method, path, opts) {
	const r = await api(method, path, opts);
	if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.text.slice(0, 200)}`);
	return r;
}

// ---- publish through the API ------------------------------------------------------------------
const BROKEN = "torch212-cxx11-cu130-x86_64-linux";	// its metadata.json is not JSON
function variant(name, backend, files) {
	files[`build/${name}/__init__.py`] = "def op(x):\n    return x\n";
	files[`build/${name}/metadata.json`] = name === BROKEN ? "{ not json\n" :
		JSON.stringify({ id: "layer_norm", name: "layer-norm", version: 1, license: "apache-2.0", "python-depends": [],
			backend: { type: backend } }) + "\n";
}
async function commit(repo, files, summary) {
	const lines = [JSON.stringify({ key: "header", value: { summary, description: "" } })];
	for (const [path, content] of Object.entries(files))
		lines.push(JSON.stringify({ key: "file", value: { path, content: b64(content), encoding: "base64" } }));
	await must("POST", `/api/kernels/${repo}/commit/main`, { token: ROOT, body: lines.join("\n") + "\n",
		type: "application/x-ndjson" });
}
async function kernel(name, readme, files, priv = false) {
	await must("POST", "/api/repos/create", { token: ROOT, json: { name, organization: "acme", type: "kernel", private: priv } });
	await commit(`acme/${name}`, { "README.md": readme, ...files }, "publish");
	await must("POST", `/api/kernels/acme/${name}/branch/v1`, { token: ROOT, json: {} });
}

const LAYERNORM_README = "---\nlibrary_name: kernels\nlicense: apache-2.0\ntags: [kernel, layer-norm]\n---\n\n" +
	"# LayerNorm\n\nA fast normalization kernel for transformer blocks.\n\n## Usage\n\nCall `layer_norm(x)`.\n";
const ADAM_README = "---\nlicense: mit\ntags:\n  - kernel\n  - optimizer\n---\n# adam\n\n" +
	"Fused Adam optimizer step in one kernel.\n\n## Who uses it\n\nServing stacks such as vLLM.\n";
// The layernorm revision: every required variant of aarch64-darwin (compliant there), CUDA on
// x86_64-linux with one broken metadata.json, CUDA on aarch64-linux but one; nothing else.
const REQUIRED = JSON.parse(readFileSync("data/build-variants.json", "utf8"));
function layernormFiles() {
	const files = {};
	for (const [backend, names] of Object.entries(REQUIRED["aarch64-darwin"]))
		names.forEach((n) => variant(n, backend, files));
	REQUIRED["x86_64-linux"].cuda.forEach((n) => variant(n, "cuda", files));
	variant(BROKEN, "cuda", files);
	REQUIRED["aarch64-linux"].cuda.slice(1).forEach((n) => variant(n, "cuda", files));
	return files;
}

async function publish() {
	await kernel("layernorm", LAYERNORM_README, layernormFiles());
	const adam = {};
	variant("torch-cuda", "cuda", adam);
	await kernel("adam", ADAM_README, adam);
	const relu = {};
	variant("torch-cpu", "cpu", relu);
	await kernel("relu", "# relu\n\nA ReLU activation.\n", relu);
	const secret = {};
	variant("torch-cpu", "cpu", secret);
	await kernel("secret", "# secret\n\nA quantum flux capacitor kernel.\n", secret, true);
}

// ---- the browser --------------------------------------------------------------------------------
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
	args: ["--no-sandbox"] });
const shot = (page, name, fullPage = false) => page.screenshot({ path: `${ARTIFACTS}/${name}.png`, fullPage });
async function context(token, options = {}) {
	const ctx = await browser.newContext({ baseURL: URL_, viewport: { width: 1366, height: 900 }, ...options });
	const page = await ctx.newPage();
	if (token) {
		await page.goto("/login");
		await page.fill("#token", token);
		await Promise.all([page.waitForURL(/\/kernels$/), page.click("form[action='/login'] button[type=submit]")]);
	}
	return { ctx, page };
}
const listed = (page) => page.$$eval("#kernels tbody tr", (trs) => trs.map((t) => t.dataset.id));

try {
	await publish();
	ok(true, "published four kernels (one private) with README cards through the API");
} catch (e) {
	bailOut(e);
}
const anon = await context(null), alice = await context(ALICE), eve = await context(EVE);

// ---- the README card ------------------------------------------------------------------------------
await anon.page.goto("/kernels/acme/layernorm");
await test("kernel page: the front matter is a card (license, tags, backends), not body text", async () => {
	const page = anon.page, problems = [];
	const readme = await page.textContent("article.readme");
	if (/library_name|apache-2\.0|layer-norm/.test(readme)) problems.push(`front matter in the body: ${readme.slice(0, 120)}`);
	if (!readme.includes("Call layer_norm(x).")) problems.push("the body is not rendered");
	const license = await page.textContent("#kernel-card #card-license");
	const tags = await page.$$eval("#kernel-card #card-tags .tag", (a) => a.map((t) => t.textContent));
	const backends = await page.textContent("#kernel-card #card-backends");
	if (license !== "apache-2.0") problems.push(`license ${license}`);
	if (JSON.stringify(tags) !== JSON.stringify(["kernel", "layer-norm"])) problems.push(`tags ${tags}`);
	if (!backends.includes("CUDA") || !backends.includes("Metal") || !backends.includes("CPU") || backends.includes("ROCm"))
		problems.push(`backends ${backends}`);
	const desc = await page.textContent("#kernel-card .description");
	if (desc !== "A fast normalization kernel for transformer blocks.") problems.push(`description ${desc}`);
	return problems;
});

// ---- the listing and search ---------------------------------------------------------------------
await test("listing: description, tags and license of each kernel, as GET /api/kernels gives them", async () => {
	const page = anon.page, problems = [];
	await page.goto("/kernels?sort=id&direction=1");
	const items = (await must("GET", "/api/kernels?sort=id")).data;
	const adam = items.find((k) => k.id === "acme/adam");
	if (!adam || adam.description !== "Fused Adam optimizer step in one kernel." || adam.license !== "mit" ||
	    JSON.stringify(adam.tags) !== JSON.stringify(["kernel", "optimizer", "license:mit"]))
		problems.push(`API item ${JSON.stringify(adam)}`);
	const row = (id) => `#kernels tr[data-id="${id}"]`;
	const desc = await page.textContent(`${row("acme/layernorm")} .description`);
	const tags = await page.$$eval(`${row("acme/layernorm")} .badge.tag`, (b) => b.map((t) => t.textContent));
	const license = await page.textContent(`${row("acme/layernorm")} .badge.license`);
	if (desc !== "A fast normalization kernel for transformer blocks.") problems.push(`description ${desc}`);
	if (JSON.stringify(tags) !== JSON.stringify(["kernel", "layer-norm"])) problems.push(`tags ${tags}`);
	if (license !== "apache-2.0") problems.push(`license ${license}`);
	await shot(page, "find-listing-1366");
	return problems;
});

const searches = [
	{ q: "layer norm", want: ["acme/layernorm"] },	// the tag layer-norm
	{ q: "fused adam", want: ["acme/adam"] },		// the description
	{ q: "vLLM", want: ["acme/adam"] },			// the README's text only
	{ q: "normalization transformer", want: ["acme/layernorm"] },
	{ q: "relu", want: ["acme/relu"] },			// the name, as before
];
for (const s of searches) {
	await test(`search "${s.q}" finds ${s.want} and nothing else (API and page)`, async () => {
		const q = encodeURIComponent(s.q);
		const fromApi = (await must("GET", `/api/kernels?search=${q}&sort=id`)).data.map((k) => k.id);
		await anon.page.goto(`/kernels?search=${q}&sort=id`);
		const fromPage = await listed(anon.page);
		const want = JSON.stringify(s.want);
		return JSON.stringify(fromApi) === want && JSON.stringify(fromPage) === want ? [] :
			[`API ${fromApi} page ${fromPage}`];
	});
}
await test("a private README's text is found by a member only (API and page)", async () => {
	const q = encodeURIComponent("flux capacitor"), problems = [];
	const ids = async (token) => (await must("GET", `/api/kernels?search=${q}`, { token })).data.map((k) => k.id);
	const page = async (who) => { await who.page.goto(`/kernels?search=${q}`); return listed(who.page); };
	const seen = { apiAnon: await ids(), apiEve: await ids(EVE), apiAlice: await ids(ALICE),
		pageAnon: await page(anon), pageEve: await page(eve), pageAlice: await page(alice) };
	for (const k of ["apiAnon", "apiEve", "pageAnon", "pageEve"])
		if (seen[k].length) problems.push(`${k} found ${seen[k]}`);
	for (const k of ["apiAlice", "pageAlice"])
		if (JSON.stringify(seen[k]) !== JSON.stringify(["acme/secret"])) problems.push(`${k} found ${seen[k]}`);
	const total = (await must("GET", `/api/kernels?search=${q}`)).headers.get("x-total-count");
	if (total !== "0") problems.push(`X-Total-Count ${total} for an anonymous search`);
	return problems;
});

// ---- the variant matrix -------------------------------------------------------------------------
const SHA = (await must("GET", "/api/kernels/acme/layernorm/revision/v1")).data.sha;
await anon.page.goto("/kernels/acme/layernorm");
await test("kernel page: an invalid metadata.json's row says why, in the API's words", async () => {
	const v = (await must("GET", "/api/kernels/acme/layernorm/variants?revision=v1")).data.variants
		.find((x) => x.name === BROKEN);
	const why = anon.page.locator("#variant-problems li", { hasText: BROKEN }).locator(".metadata-error");
	const text = (await why.textContent()) || "";
	const visible = await why.isVisible();
	const row = await anon.page.textContent(`tr[data-variant="${BROKEN}"] .metadata-error`);
	return v.metadata.error && text === v.metadata.error && visible && row === text ? [] :
		[`page "${text}" (visible ${visible}, row "${row}") API "${v.metadata.error}"`];
});
async function badgeAndRows(page, repo) {
	const c = (await must("GET", `/api/kernels/${repo}/compliance?revision=v1`)).data.versions[0];
	const problems = [];
	const badge = await page.textContent("#compliance-summary .badge");
	if (badge !== (c.compliant ? "compliant" : "not compliant")) problems.push(`badge "${badge}", API compliant=${c.compliant}`);
	const rows = await page.$$eval("#variant-matrix tr.missing", (trs) => trs.map((t) => `${t.dataset.group}|${t.dataset.missing}`));
	const want = c.groups.filter((g) => g.targeted && !g.compliant)
		.flatMap((g) => g.missing.map((m) => `${g.backend} ${g.system}|${m}`));
	if (JSON.stringify(rows.sort()) !== JSON.stringify(want.sort()))
		problems.push(`missing rows ${rows.length} (${rows.slice(0, 3)}) want ${want.length} (${want.slice(0, 3)})`);
	const summary = await page.textContent("#compliance-summary");
	for (const g of c.groups.filter((x) => x.compliant))
		if (!summary.includes(`${g.backend} ${g.system}`)) problems.push(`summary does not name compliant ${g.backend} ${g.system}`);
	return problems;
}
await test("layernorm: the badge (compliant for aarch64-darwin) and the missing rows (only the CUDA groups it builds) agree", async () => {
	const problems = await badgeAndRows(anon.page, "acme/layernorm");
	if (await anon.page.textContent("#compliance-summary .badge") !== "compliant") problems.push("not compliant");
	const groups = await anon.page.$$eval("#variant-matrix tr.missing", (trs) => [...new Set(trs.map((t) => t.dataset.group))]);
	if (JSON.stringify(groups) !== JSON.stringify(["cuda aarch64-linux"])) problems.push(`missing rows of ${groups}`);
	return problems;
});
await test("adam (Python-only, torch-cuda): compliant, and no required variant shown as missing", async () => {
	await anon.page.goto("/kernels/acme/adam");
	const problems = await badgeAndRows(anon.page, "acme/adam");
	const n = await anon.page.$$eval("#variant-matrix tr.missing", (trs) => trs.length);
	return n ? [...problems, `${n} missing rows`] : problems;
});

// ---- snippets, page length ------------------------------------------------------------------------
await test("snippets: full-width blocks in focusable, named regions that scroll by keyboard (390 px)", async () => {
	const { ctx, page } = await context(null, { viewport: { width: 390, height: 844 } });
	const problems = [];
	await page.goto("/kernels/acme/layernorm");
	const boxes = await page.$$eval("pre.snippet", (ps) => ps.map((p) => ({ id: p.firstElementChild.id, tab: p.tabIndex,
		role: p.getAttribute("role"), label: p.getAttribute("aria-label"), w: p.getBoundingClientRect().width,
		main: document.querySelector("main").clientWidth })));
	for (const id of ["snippet-python", "snippet-lock", "snippet-endpoint", "env-snippet"]) {
		const b = boxes.find((x) => x.id === id);
		if (!b || b.tab !== 0 || b.role !== "region" || !b.label) problems.push(`${id}: ${JSON.stringify(b)}`);
		else if (b.w < 0.8 * b.main) problems.push(`${id} is ${b.w}px wide in a ${b.main}px main`);
	}
	// Tab reaches the environment snippet; the arrow keys scroll it
	let reached = false;
	for (let i = 0; i < 300 && !reached; i++) {
		await page.keyboard.press("Tab");
		reached = await page.evaluate(() => document.activeElement.firstElementChild?.id === "env-snippet");
	}
	if (!reached) problems.push("Tab never reaches the environment snippet");
	const overflow = await page.$eval("pre:has(#env-snippet)", (p) => p.scrollWidth - p.clientWidth);
	// the arrow keys scroll the focused region (smoothly, so it may take a
	// moment; a script of the page that re-renders may take the focus: the
	// region is focused again, by the keyboard's Tab order as above, before
	// each try)
	let scrolled = false;
	for (let i = 0; i < 20 && !scrolled; i++) {
		await page.focus("pre:has(#env-snippet)");
		for (let k = 0; k < 5; k++) await page.keyboard.press("ArrowRight");
		scrolled = await page.waitForFunction(() => document.querySelector("pre:has(#env-snippet)").scrollLeft > 0,
			null, { timeout: 1500 }).then(() => true, () => false);
	}
	if (!(overflow > 0) || !scrolled) problems.push(`ArrowRight did not scroll the snippet (overflow ${overflow})`);
	await shot(page, "find-kernel-390");
	await page.goto("/kernels");
	await shot(page, "find-listing-390");
	await ctx.close();
	return problems;
});
await test("kernel page: variant groups fold; the page is measured at 1366x900", async () => {
	const page = anon.page;
	await page.goto("/kernels/acme/layernorm");
	const height = await page.evaluate(() => document.documentElement.scrollHeight);
	diag(`layernorm page height at 1366x900: ${height}px`);
	await shot(page, "find-kernel-1366");
	await shot(page, "find-kernel-1366-full", true);
	const closed = await page.$$eval("#variant-matrix details:not([open])", (d) => d.map((x) => x.dataset.group));
	const open = await page.$$eval("#variant-matrix details[open]", (d) => d.map((x) => x.dataset.group));
	const problems = JSON.stringify(closed) === JSON.stringify(["cuda", "cpu", "metal"]) && !open.length ? [] :
		[`closed ${closed} open ${open}`];
	await page.click("#variant-matrix details[data-group=metal] summary");
	if (!(await page.isVisible("tr[data-variant='torch211-metal-aarch64-darwin']"))) problems.push("a group does not open");
	return problems;
});

// ---- Will it load for me? -----------------------------------------------------------------------
await test("the environment snippet detects Metal (MPS) with the macOS version, and XPU", async () => {
	const s = await anon.page.textContent("#env-snippet");
	return ["torch.backends.mps.is_available()", "backend=metal", "mac_ver()", "'xpu='"].filter((w) => !s.includes(w))
		.map((w) => `snippet lacks ${w}`);
});
const MAC = "torch=2.11&backend=metal&os=darwin&macos=26.0&arch=aarch64";
await test("will it load without JavaScript: macOS 26 on Apple silicon picks the Metal variant, as the API", async () => {
	const { ctx, page } = await context(null, { javaScriptEnabled: false });
	await page.goto("/kernels/acme/layernorm");
	await page.fill("#wil-torch", "2.11");
	await page.selectOption("#wil-backend", "metal");
	await page.selectOption("#wil-os", "darwin");
	await page.fill("#wil-macos", "26.0");
	await page.selectOption("#wil-arch", "aarch64");
	const [res] = await Promise.all([page.waitForNavigation(), page.click("#wil-form button[type=submit]")]);
	const problems = [];
	if (!/text\/html/.test(res.headers()["content-type"] || "")) problems.push(`answered ${res.headers()["content-type"]}`);
	const selected = await page.getAttribute("#wil-selected", "data-selected");
	const rejected = await page.$$eval("#wil-rejected tbody tr", (trs) => trs.length);
	const want = (await must("GET", `/api/kernels/acme/layernorm/variants?compatible=true&revision=${SHA}&${MAC}`)).data;
	if (selected !== "torch211-metal-aarch64-darwin" || selected !== want.selected || rejected !== want.rejected.length)
		problems.push(`page ${selected}/${rejected} API ${want.selected}/${want.rejected.length}`);
	await shot(page, "find-will-it-load-nojs");
	await page.fill("#wil-macos", "15.5");
	await Promise.all([page.waitForNavigation(), page.click("#wil-form button[type=submit]")]);
	const old = await page.getAttribute("#wil-selected", "data-selected");
	if (old === "torch211-metal-aarch64-darwin") problems.push("macOS 15.5 still picks the Metal variant");
	await page.fill("#wil-torch", "2.12");
	await page.selectOption("#wil-backend", "cuda");
	await page.fill("#wil-backend_version", "13.0");
	await page.selectOption("#wil-os", "linux");
	await page.selectOption("#wil-arch", "x86_64");
	await Promise.all([page.waitForNavigation(), page.click("#wil-form button[type=submit]")]);
	const error = (await must("GET", "/api/kernels/acme/layernorm/variants?revision=v1")).data.variants
		.find((x) => x.name === BROKEN).metadata.error;
	const notice = await page.textContent("#wil-result .notice").catch(() => "");
	if (!notice.includes(BROKEN) || !notice.includes(error)) problems.push(`the warning does not say why: "${notice}"`);
	await page.fill("#wil-torch", "x.y");
	const bad = await Promise.all([page.waitForNavigation(), page.click("#wil-form button[type=submit]")]);
	const alert = await page.textContent("#wil-result [role=alert]").catch(() => "");
	if (bad[0].status() !== 400 || !alert) problems.push(`a bad torch version: ${bad[0].status()} "${alert}"`);
	await ctx.close();
	return problems;
});
await test("will it load with JavaScript: a pasted Mac line picks the Metal variant", async () => {
	const page = anon.page;
	await page.goto("/kernels/acme/layernorm");
	await page.fill("#wil-paste", "torch=2.11.0 backend=metal os=darwin arch=arm64 macos=26.1");
	const [req] = await Promise.all([page.waitForRequest(/\/-\/variants\?/), page.click("#wil-form button[type=submit]")]);
	await page.waitForSelector("#wil-selected");
	const selected = await page.getAttribute("#wil-selected", "data-selected");
	return selected === "torch211-metal-aarch64-darwin" ? [] : [`selected ${selected} for ${req.url()}`];
});

await browser.close();
done();
