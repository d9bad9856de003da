// web_holes.mjs -- the holes of issue 22 in the web UI, in Debian's chromium
// (headless) driven by playwright-core, against a real khub started by
// tests/integration/t0143-web-holes.sh: the sign-in page's ?next= never
// takes the browser to another host; a private repo's README images and
// relative links load for a member (signed in with a write or a read token)
// and are refused to the anonymous, a non-member and a dead session, while
// the API still ignores the cookie; and a README that embeds a variant's
// metadata.json counts no download however often it is viewed. TAP out.
import { chromium } from "playwright-core";
import { execFileSync } from "node:child_process";
import { ok, test, diag, done, bailOut } from "../js/tap.mjs";

const URL_ = process.env.KHUB_URL;
const ORIGIN = new URL(URL_).origin;
const ROOT = process.env.ROOT_TOKEN, ALICE = process.env.ALICE_TOKEN, MALLORY = process.env.MALLORY_TOKEN;
const READER = process.env.READER_TOKEN, DEAD = process.env.DEAD_TOKEN, DEAD_ID = process.env.DEAD_TOKEN_ID;
// what the kernels loader sends (through huggingface_hub)
const LOADER_UA = "kernels/0.15.2; hf_hub/1.29.0; python/3.11.2; torch/2.11.0+cu128";

async function api(method, path, { token, json, body, type, ua } = {}) {
	const headers = {};
	if (token) headers.Authorization = `Bearer ${token}`;
	if (ua) headers["User-Agent"] = ua;
	if (json !== undefined) {
		headers["Content-Type"] = "application/json";
		body = JSON.stringify(json);
	} else if (type) headers["Content-Type"] = type;
	const res = await fetch(`${URL_}${path}`, { method, headers, body, redirect: "manual" });
	const buf = Buffer.from(await res.arrayBuffer());
	let data = null;
	try { data = JSON.parse(buf.toString()); } catch { /* not JSON */ }
	return { status: res.status, headers: res.headers, buf, data };
}
async function must(method, path, opts) {
	const r = await api(method, path, opts);
	if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.buf.toString().slice(0, 200)}`);
	return r;
}
async function commit(repo, files, summary) {
	const lines = [JSON.stringify({ key: "header", value: { summary, description: "" } })];
	for (const [path, content] of Object.entries(files))
		lines.push(JSON.stringify({ key: "file", value: { path, content: Buffer.from(content).toString("base64"),
			encoding: "base64" } }));
	return (await must("POST", `/api/kernels/${repo}/commit/main`, { token: ROOT, body: lines.join("\n") + "\n",
		type: "application/x-ndjson" })).data.commitOid;
}
const variant = (v) => ({ [`build/${v}/__init__.py`]: "def relu(x):\n    return x\n",
	[`build/${v}/metadata.json`]: JSON.stringify({ version: 1, "python-depends": [], backend: { type: "cpu" } }) + "\n" });
// a 1x1 PNG
const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
	"base64");
const SVG = "<svg xmlns='http://www.w3.org/2000/svg' width='4' height='4'><script>parent.__pwned='svg'</script>" +
	"<rect width='4' height='4'/></svg>";
const SECRET_README = "# secret\n\n![plot](docs/plot.png)\n\n![diagram](./docs/diagram.svg)\n\n" +
	"![absolute](/kernels/acme/secret/resolve/main/docs/plot.png)\n\n" +
	"[usage](docs/usage.md) and [the docs folder](docs/)\n";
const PUBLIC_README = "# relu\n\n![the variant's metadata](build/torch-cpu/metadata.json)\n";

let SECRET_SHA;
try {
	for (const [name, priv] of [["secret", true], ["relu", false]])
		await must("POST", "/api/repos/create", { token: ROOT, json: { name, organization: "acme", type: "kernel", private: priv } });
	SECRET_SHA = await commit("acme/secret", { "README.md": SECRET_README, "docs/plot.png": PNG, "docs/diagram.svg": SVG,
		"docs/usage.md": "# usage\n", "docs/page.html": "<script>alert(1)</script>", ...variant("torch-cpu") }, "secret");
	await commit("acme/relu", { "README.md": PUBLIC_README, ...variant("torch-cpu"), ...variant("torch-universal") }, "relu");
	ok(true, "a private repo with README images and links, a public one whose README embeds metadata.json");
} catch (e) {
	bailOut(e);
}

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
	args: ["--no-sandbox"] });
async function signedIn(token) {
	const ctx = await browser.newContext({ baseURL: URL_ });
	const page = await ctx.newPage();
	await page.goto("/login");
	await page.fill("#token", token);
	await Promise.all([page.waitForURL(/\/kernels$/), page.click("form[action='/login'] button[type=submit]")]);
	return { ctx, page };
}
async function anonymous() {
	const ctx = await browser.newContext({ baseURL: URL_ });
	return { ctx, page: await ctx.newPage() };
}
// Another host answers anything (nothing leaves the machine): landing there
// is seen, not a DNS error.
async function fenced(ctx) {
	await ctx.route((url) => url.origin !== ORIGIN, (route) =>
		route.fulfill({ status: 200, contentType: "text/html", body: "<title>evil</title>elsewhere" }));
}

// ---- 8: ?next= ----------------------------------------------------------------------------------
const FOREIGN = ["/%09/evil.example/x", "/%0A/evil.example/x", "/%0D%0A/evil.example/x", "//evil.example/x",
	"/%5Cevil.example/x", "/%5C%5Cevil.example/x", "%5C%5Cevil.example/x", "/%2F/evil.example/x", "/%252F/evil.example/x",
	"https://evil.example/x", "%09//evil.example/x", "/%20/evil.example/x", "/%E3%80%80/evil.example/x",
	"javascript:alert(1)", "/%2509/evil.example/x"];
const alice = await signedIn(ALICE);
await fenced(alice.ctx);
await test("signed in, /login?next= never leaves the khub origin (15 encodings of another host)", async () => {
	const problems = [];
	for (const next of FOREIGN) {
		try {
			await alice.page.goto(`/login?next=${next}`);
		} catch (e) {	/* a redirect to another host that does not resolve */
			problems.push(`${next}: left the origin? ${e.message.split("\n")[0]}`);
			continue;
		}
		const at = new URL(alice.page.url());
		if (at.origin !== ORIGIN) problems.push(`${next}: landed on ${alice.page.url()}`);
	}
	return problems;
});
await test("signed in, /login?next=/kernels/acme/relu still lands there", async () => {
	const page = await alice.ctx.newPage();	// nothing left over from the redirects above
	await page.goto("/login?next=/kernels/acme/relu");
	const at = page.url();
	await page.close();
	return at === `${ORIGIN}/kernels/acme/relu` ? [] : [`landed on ${at}`];
});
// The sign-in POST: Chrome's CSP form-action 'self' also stops a redirect
// to another host after a form, so the server's own answer is checked too.
await test("signing in with next=/%09/evil.example/x: the browser stays on khub, the server's Location is local", async () => {
	const problems = [];
	for (const bad of ["/\t/evil.example/x", "//evil.example/x", "/\\evil.example/x", "/%2F/evil.example/x"]) {
		const form = await anonymous();	// each sign-in from a fresh sign-in form
		await form.page.goto("/login");
		const csrf = await form.page.getAttribute("form[action='/login'] input[name=csrf]", "value");
		const res = await form.page.request.post("/login", { form: { csrf, token: ALICE, next: bad }, maxRedirects: 0 });
		const loc = res.headers()["location"] || "";
		if (res.status() !== 303 || new URL(loc, ORIGIN).origin !== ORIGIN || /[\x00-\x20\\]|^\/%2F/i.test(loc))
			problems.push(`next=${JSON.stringify(bad)}: ${res.status()} Location ${JSON.stringify(loc)}`);
		await form.ctx.close();
	}
	const { ctx, page } = await anonymous();
	await fenced(ctx);
	await page.goto("/login?next=/%09/evil.example/x");
	const next = await page.getAttribute("form[action='/login'] input[name=next]", "value");
	if (next !== "/kernels") problems.push(`the form carries next=${JSON.stringify(next)}`);
	await page.fill("#token", ALICE);
	let at;
	try {
		// the sign-in's redirect, wherever it goes
		await Promise.all([page.waitForURL((u) => u.origin !== ORIGIN || u.pathname !== "/login", { timeout: 20000 }),
			page.click("form[action='/login'] button[type=submit]")]);
		at = page.url();
	} catch (e) {
		at = `${page.url()} (${e.message.split("\n")[0]})`;
	}
	await ctx.close();
	if (!at.startsWith(`${ORIGIN}/`)) problems.push(`landed on ${at}`);
	return problems;
});

// ---- 9: a private repo's README images and links --------------------------------------------------
// The README as a visitor's browser shows it: each image's URL, whether it
// decoded, and the links' URLs.
async function readme(page) {
	const res = await page.goto("/kernels/acme/secret");
	if (res.status() !== 200) return { status: res.status(), images: [], links: [] };
	const images = await page.$$eval("article.readme img", (imgs) => imgs.map((i) => ({ src: i.src, alt: i.alt,
		loaded: i.complete && i.naturalWidth > 0 })));
	const links = await page.$$eval("article.readme a:not(.anchor)", (as) => as.map((a) => a.href));
	return { status: 200, images, links };
}
const member = await readme(alice.page);
const imageUrl = member.images.find((i) => i.alt === "plot")?.src || "";
const svgUrl = member.images.find((i) => i.alt === "diagram")?.src || "";
const docUrl = imageUrl.replace(/plot\.png$/, "page.html");
await test("a member sees the private README's images (a PNG, an SVG, an absolute resolve URL) decoded", async () => {
	const problems = [];
	if (member.status !== 200) return [`kernel page ${member.status}`];
	if (member.images.length !== 3) problems.push(`${member.images.length} images`);
	for (const i of member.images)
		if (!i.loaded || new URL(i.src).origin !== ORIGIN) problems.push(`${i.alt}: ${i.src} loaded=${i.loaded}`);
	if (await alice.page.evaluate(() => window.__pwned)) problems.push("the SVG's script ran");
	return problems;
});
await test("a member follows the private README's relative links (a file, a folder): 200 pages", async () => {
	const problems = [];
	if (member.links.length !== 2) problems.push(`links ${member.links}`);
	for (const href of member.links) {
		const res = await alice.page.goto(href);
		if (res.status() !== 200 || new URL(href).origin !== ORIGIN) problems.push(`${href}: ${res.status()}`);
	}
	return problems;
});
await test("the file route: the right type, nosniff, a sandbox CSP; SVG and HTML only as downloads", async () => {
	const problems = [];
	const png = await alice.page.request.get(imageUrl);
	const h = png.headers();
	if (png.status() !== 200 || h["content-type"] !== "image/png" || !(await png.body()).equals(PNG))
		problems.push(`png: ${png.status()} ${h["content-type"]}`);
	if (h["x-content-type-options"] !== "nosniff") problems.push("png: no nosniff");
	if (!/(^|, *)sandbox/.test(h["content-security-policy"] || "")) problems.push(`png: CSP ${h["content-security-policy"]}`);
	if (h["access-control-allow-origin"]) problems.push("png: a CORS header on a cookie route");
	for (const [url, name] of [[svgUrl, "svg"], [docUrl, "html"]]) {
		const res = await alice.page.request.get(url);
		const hh = res.headers();
		if (res.status() !== 200 || !(hh["content-disposition"] || "").startsWith("attachment") ||
		    (hh["content-type"] || "").includes("html"))
			problems.push(`${name}: ${res.status()} ${hh["content-type"]} ${hh["content-disposition"]}`);
	}
	for (const method of ["HEAD", "POST"]) {
		const res = await alice.page.request.fetch(imageUrl, { method });
		if (res.status() === 200) problems.push(`${method}: 200`);
	}
	return problems;
});
await test("read-scoped member: the README's images load", async () => {
	const reader = await signedIn(READER);
	const r = await readme(reader.page);
	await reader.ctx.close();
	return r.status === 200 && r.images.length === 3 && r.images.every((i) => i.loaded) ? [] :
		[`${r.status} ${JSON.stringify(r.images)}`];
});
// what a visitor gets for the member's image URL: the status and whether
// the PNG's bytes came back
async function fileFor(page) {
	const res = await page.request.get(imageUrl);
	return { status: res.status(), leaked: (await res.body()).equals(PNG) };
}
await test("anonymous: the private image is refused (404, no bytes); the kernel page too", async () => {
	const { ctx, page } = await anonymous();
	const f = await fileFor(page);
	const r = await readme(page);
	await ctx.close();
	return f.status === 404 && !f.leaked && r.status === 404 ? [] : [`file ${f.status} leaked=${f.leaked}, page ${r.status}`];
});
await test("non-member: the private image is refused (404, no bytes)", async () => {
	const mallory = await signedIn(MALLORY);
	const f = await fileFor(mallory.page);
	await mallory.ctx.close();
	return f.status === 404 && !f.leaked ? [] : [`${f.status} leaked=${f.leaked}`];
});
await test("dead session (its token revoked): the private image is refused", async () => {
	const dead = await signedIn(DEAD);
	const before = await fileFor(dead.page);
	execFileSync(process.env.KHUB_BIN, ["admin", "token", "revoke", DEAD_ID], { stdio: "ignore" });
	const after = await fileFor(dead.page);
	await dead.ctx.close();
	return before.status === 200 && after.status === 404 && !after.leaked ? [] :
		[`before ${before.status}, after ${after.status} leaked=${after.leaked}`];
});
await test("the API still ignores the session cookie: resolve and repo info answer as to the anonymous", async () => {
	const problems = [];
	for (const path of [`/kernels/acme/secret/resolve/${SECRET_SHA}/docs/plot.png`, "/kernels/acme/secret/resolve/main/README.md",
		"/api/kernels/acme/secret", "/api/whoami-v2"]) {
		const res = await alice.page.request.get(path);	// the session cookie goes along
		if (res.status() !== 401) problems.push(`${path}: ${res.status()}`);
		if ((await res.body()).equals(PNG)) problems.push(`${path}: the bytes`);
	}
	return problems;
});

// ---- 10: viewing a README is not a download ---------------------------------------------------------
async function downloads() {
	return (await must("GET", "/api/kernels/acme/relu/downloads")).data;
}
await test("viewing a README that embeds metadata.json counts no download, nor the page route; a loader's fetch does", async () => {
	const viewers = [alice, await anonymous()];
	const fetched = [];
	for (const v of viewers) {
		v.page.on("response", (r) => { if (r.url().includes("metadata.json")) fetched.push(r.status()); });
		for (let i = 0; i < 3; i++)
			await v.page.goto("/kernels/acme/relu");	// "load": the images were fetched
	}
	// the page route never counts, whoever asks
	const viaPage = await alice.page.request.get("/kernels/acme/relu/-/resolve/main/build/torch-cpu/metadata.json",
		{ headers: { "User-Agent": LOADER_UA } });
	if (viaPage.status() !== 200) fetched.push(`page route ${viaPage.status()}`);
	// one loader fetch of another variant: when it shows, the counts of
	// everything fetched before it have been flushed too
	await must("GET", "/kernels/acme/relu/resolve/main/build/torch-universal/metadata.json", { ua: LOADER_UA });
	let d;
	for (let i = 0; i < 200; i++) {
		d = await downloads();
		if (d.total >= 1) break;
		await new Promise((r) => setTimeout(r, 100));
	}
	await viewers[1].ctx.close();
	const rows = d.rows.map((r) => `${r.variant}:${r.count}`).sort();
	const problems = [];
	if (fetched.length < 2 || fetched.some((s) => s !== 200)) problems.push(`the pages fetched the image: ${fetched}`);
	if (JSON.stringify(rows) !== JSON.stringify(["torch-universal:1"])) problems.push(`counted ${rows} (total ${d.total})`);
	return problems;
});

diag(`private image URL: ${imageUrl}`);
await browser.close();
done();
