/* SPDX-License-Identifier: MIT */
/* memtl_html.c - the self-contained HTML page of `stepprof memory`: one section per window, its
 * data as a JavaScript object literal, drawn by the vanilla JS at the end of the page onto a
 * canvas (levels per GPU and host, steps as labelled bands, the peak marked, a hover readout
 * with the largest live allocations) with a table of the allocations alive at each peak. No
 * network: nothing is loaded from elsewhere. Sizes are bounded: long series are thinned (each
 * bucket keeps its highest and its last point) and only the largest allocations are embedded. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "export.h"
#include "memtl.h"

#define MAX_ALLOCS SP_MEMTL_MAX_ALLOCS /* allocations embedded per window */
#define MAX_PEAK_ROWS 500   /* rows of a peak table */
#define MAX_FRAMES 12       /* frames embedded per stack */

static const char page_head[] = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
				"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>";

static const char page_style[] =
	"</title>\n<style>\n"
	"body{font:14px/1.4 system-ui,sans-serif;margin:16px 24px;color:#222}\n"
	"h1{font-size:20px}h2{font-size:17px;margin-top:32px}h3{font-size:14px;margin:18px 0 6px}\n"
	".meta{color:#555}.legend span{display:inline-block;border-left:14px solid;padding:0 12px 0 6px;margin:2px 0}\n"
	".plot{position:relative;width:100%;margin:8px 0}canvas{display:block;cursor:crosshair}\n"
	".tip{position:absolute;display:none;top:28px;max-width:640px;background:#fff;border:1px solid #999;"
	"padding:6px 8px;font-size:12px;box-shadow:2px 2px 6px #0003;pointer-events:none}\n"
	".tip .h{margin-top:4px;font-weight:bold}\n"
	"table{border-collapse:collapse;font-size:12px}td,th{border-bottom:1px solid #ddd;padding:2px 8px;"
	"text-align:left;vertical-align:top}td.n{text-align:right;white-space:nowrap}\n"
	"td.s{font-family:monospace;font-size:11px}\n"
	"</style></head><body>\n<script>\"use strict\";const SP_WINDOWS=[];</script>\n";

/* Draws every window of SP_WINDOWS; the page works offline (no URL anywhere). */
static const char page_script[] =
	"<script>\n\"use strict\";\n"
	"const "
	"COLORS=[\"#1f77b4\",\"#d62728\",\"#2ca02c\",\"#9467bd\",\"#ff7f0e\",\"#17becf\",\"#8c564b\",\"#e377c2\"];\n"
	"function fmtB(b){const u=[\"B\",\"KiB\",\"MiB\",\"GiB\",\"TiB\"];let i=0;while(b>=1024&&i<4){b/=1024;i++;}"
	"return (i?b.toFixed(2):String(b))+u[i];}\n"
	"function fmtMs(ms){return (ms>=0?\"+\":\"\")+ms.toFixed(3)+\" ms\";}\n"
	"function el(tag,text,cls){const e=document.createElement(tag);if(text!==undefined)e.textContent=text;"
	"if(cls)e.className=cls;return e;}\n"
	"function frames(W,id,n){const f=W.stacks[id],l=W.sites&&W.sites[id];"
	"return f?(l?l+\" \\u2014 \":\"\")+f.slice(0,n).join(\" \\u2190 \"):\"(no stack)\";}\n"
	"function levelAt(s,t){let lo=0,hi=s.t.length-1,r=0;while(lo<=hi){const m=(lo+hi)>>1;"
	"if(s.t[m]<=t){r=m;lo=m+1;}else hi=m-1;}return s.v[r];}\n"
	"function render(W){\n"
	" const sec=document.getElementById(\"w\"+W.id);\n"
	" sec.appendChild(el(\"h2\",`Window ${W.id}: steps ${W.first_step}-${W.last_step}, ${W.dur.toFixed(3)} ms`"
	"+(W.complete?\"\":\" (incomplete)\")));\n"
	" if(!W.series.length&&!W.torch){sec.appendChild(el(\"p\",\"No memory records in this window.\"));return;}\n"
	" const lg=el(\"div\",undefined,\"legend\");\n"
	" W.series.forEach((s,i)=>{const e=el(\"span\",`${s.label}: peak ${fmtB(s.peak)} at ${fmtMs(s.peak_ms)}`"
	"+(s.peak_ever?`, peak since process start ${fmtB(s.peak_ever)}`:\"\"));"
	"e.style.borderColor=COLORS[i%COLORS.length];lg.appendChild(e);});\n"
	" sec.appendChild(lg);\n"
	" if(W.torch){const T=W.torch,p=el(\"p\",`PyTorch's caching allocator (${T.path}): allocated (black dashes), "
	"peak ${fmtB(T.peak)} at ${fmtMs(T.peak_ms)}; reserved (grey dots), ${fmtB(T.reserved)} at the window's "
	"end`+(T.driver_end>=0?`; the driver's level at the end ${fmtB(T.driver_end)}, "
	"${fmtB(Math.max(0,T.driver_end-T.reserved))} of it outside torch's reserve (other libraries' workspaces, "
	"allocations before stepprof tracked memory)`:\"\")+(T.mapped?\"\":\". The allocator's lines have their own "
	"time axis: 0 is when its history was turned on, not the window's start (the trace's clock records do not "
	"place them in the window)\")+(T.cut?`. The allocator's history was cut: its series starts at "
	"${fmtMs(T.start_ms)}`:\"\"),\"meta\");sec.appendChild(p);}\n"
	" const wrap=el(\"div\",undefined,\"plot\"),cv=el(\"canvas\"),tip=el(\"div\",undefined,\"tip\");\n"
	" wrap.appendChild(cv);wrap.appendChild(tip);sec.appendChild(wrap);\n"
	" const H=360,L=84,R=24,T=30,B=28;let top=1;W.series.forEach(s=>{if(s.peak>top)top=s.peak;});\n"
	" if(W.torch)W.torch.r.concat([W.torch.peak]).forEach(v=>{if(v>top)top=v;});top*=1.1;\n"
	" function draw(cur){\n"
	"  const w=wrap.clientWidth||900,d=window.devicePixelRatio||1;\n"
	"  cv.width=w*d;cv.height=H*d;cv.style.width=w+\"px\";cv.style.height=H+\"px\";\n"
	"  const c=cv.getContext(\"2d\");c.setTransform(d,0,0,d,0,0);c.clearRect(0,0,w,H);c.font=\"11px sans-serif\";\n"
	"  const x=t=>L+(w-L-R)*(W.dur>0?Math.min(Math.max(t,0),W.dur)/W.dur:0),y=v=>H-B-(H-T-B)*v/top;\n"
	"  W.steps.forEach((st,i)=>{const a=x(st[1]),b=x(st[2]);c.fillStyle=i%2?\"#eef2f8\":\"#e2e9f4\";"
	"c.fillRect(a,T,Math.max(1,b-a),H-T-B);c.fillStyle=\"#456\";c.fillText(\"ProfilerStep#\"+st[0],a+3,T+12+(i%2)*"
	"12);});\n"
	"  "
	"c.strokeStyle=\"#999\";c.fillStyle=\"#333\";c.beginPath();c.moveTo(L,T);c.lineTo(L,H-B);c.lineTo(w-R,H-B);c."
	"stroke();\n"
	"  for(let k=0;k<=4;k++){const v=top/1.1*k/4;c.fillText(fmtB(Math.round(v)),4,y(v)+4);"
	"c.strokeStyle=\"#ddd\";c.beginPath();c.moveTo(L,y(v));c.lineTo(w-R,y(v));c.stroke();}\n"
	"  for(let k=0;k<=5;k++){const t=W.dur*k/5;c.fillText(t.toFixed(2)+\" ms\",x(t)-18,H-B+16);}\n"
	"  W.series.forEach((s,i)=>{const "
	"col=COLORS[i%COLORS.length];c.strokeStyle=col;c.lineWidth=1.6;c.beginPath();\n"
	"   c.moveTo(x(s.t[0]),y(s.v[0]));for(let k=1;k<s.t.length;k++){c.lineTo(x(s.t[k]),y(s.v[k-1]));"
	"c.lineTo(x(s.t[k]),y(s.v[k]));}\n"
	"   c.lineTo(x(W.dur),y(s.v[s.v.length-1]));c.stroke();c.lineWidth=1;\n"
	"   c.fillStyle=col;c.beginPath();c.arc(x(s.peak_ms),y(s.peak),4,0,2*Math.PI);c.fill();\n"
	"   c.fillText(\"peak \"+fmtB(s.peak),Math.min(x(s.peak_ms)+6,w-R-80),y(s.peak)-6);});\n"
	"  if(W.torch){const "
	"T=W.torch;[[T.a,\"#000\",[6,3]],[T.r,\"#888\",[2,3]]].forEach(([v,col,dash])=>{c.strokeStyle=col;c."
	"setLineDash(dash);c.lineWidth=1.4;c.beginPath();c.moveTo(x(T.t[0]),y(v[0]));for(let "
	"k=1;k<T.t.length;k++){c.lineTo(x(T.t[k]),y(v[k-1]));c.lineTo(x(T.t[k]),y(v[k]));}c.lineTo(x(W.dur),y(v[v."
	"length-1]));c.stroke();});c.setLineDash([]);c.lineWidth=1;}\n"
	"  if(cur!==undefined){c.strokeStyle=\"#000\";c.setLineDash([3,3]);c.beginPath();c.moveTo(x(cur),T);"
	"c.lineTo(x(cur),H-B);c.stroke();c.setLineDash([]);}\n"
	"  return px=>(px-L)/(w-L-R)*W.dur;}\n"
	" let inv=draw();\n"
	" cv.addEventListener(\"mousemove\",ev=>{const r=cv.getBoundingClientRect(),px=ev.clientX-r.left,t=inv(px);\n"
	"  if(t<0||t>W.dur){tip.style.display=\"none\";inv=draw();return;}\n"
	"  inv=draw(t);tip.replaceChildren(el(\"b\",fmtMs(t)+\" from the window's start\"));\n"
	"  W.series.forEach(s=>tip.appendChild(el(\"div\",`${s.label}: ${fmtB(levelAt(s,t))} live`)));\n"
	"  if(W.torch){const T=W.torch;tip.appendChild(el(\"div\",`PyTorch allocated "
	"${fmtB(levelAt({t:T.t,v:T.a},t))}, reserved ${fmtB(levelAt({t:T.t,v:T.r},t))}`));}\n"
	"  const live=W.allocs.filter(a=>a[1]<=t&&(a[2]===null||a[2]>t)).sort((p,q)=>q[3]-p[3]).slice(0,5);\n"
	"  if(live.length)tip.appendChild(el(\"div\",\"largest live allocations\",\"h\"));\n"
	"  live.forEach(a=>{const on=W.series[a[0]].label;tip.appendChild(el(\"div\",`${fmtB(a[3])} "
	"${W.kinds[a[4]]||\"?\"}`"
	"+(on===\"host\"?\"\":` on ${on}`)+`, age ${(t-a[1]).toFixed(3)} ms: ${frames(W,a[5],3)}`));});\n"
	"  tip.style.left=Math.max(0,Math.min(px+14,wrap.clientWidth-420))+\"px\";tip.style.display=\"block\";});\n"
	" cv.addEventListener(\"mouseleave\",()=>{tip.style.display=\"none\";inv=draw();});\n"
	" window.addEventListener(\"resize\",()=>{inv=draw();});\n"
	" W.series.forEach(s=>{\n"
	"  sec.appendChild(el(\"h3\",`Allocations alive at the peak of ${s.label} (${fmtB(s.peak)} at "
	"${fmtMs(s.peak_ms)}): ${s.n_at_peak}`+(s.n_at_peak>s.at_peak.length?`, the largest ${s.at_peak.length} "
	"shown`:\"\")));\n"
	"  if(!s.at_peak.length)return;\n"
	"  const tb=el(\"table\"),hr=el(\"tr\");[\"Size\",\"Kind\",\"Made\",\"Stack (innermost first)\"].forEach(h=>"
	"hr.appendChild(el(\"th\",h)));tb.appendChild(hr);\n"
	"  s.at_peak.forEach(i=>{const a=W.allocs[i],tr=el(\"tr\");tr.appendChild(el(\"td\",fmtB(a[3]),\"n\"));\n"
	"   tr.appendChild(el(\"td\",W.kinds[a[4]]||\"?\"));"
	"tr.appendChild(el(\"td\",fmtMs(a[1])+(a[1]<0?\" (before the window)\":\"\"),\"n\"));\n"
	"   const st=el(\"td\",frames(W,a[5],4),\"s\");st.title=(W.stacks[a[5]]||[]).join(\"\\n\");tr.appendChild(st);"
	"tb.appendChild(tr);});\n"
	"  sec.appendChild(tb);});\n"
	" if(W.torch&&W.torch.at_peak.length){const T=W.torch;sec.appendChild(el(\"h3\",`PyTorch tensors live at the "
	"allocator's peak (${fmtB(T.peak)} at ${fmtMs(T.peak_ms)}), by line`));const "
	"tb=el(\"table\"),hr=el(\"tr\");[\"Bytes\",\"Blocks\",\"Line (innermost frame outside "
	"torch)\"].forEach(h=>hr.appendChild(el(\"th\",h)));tb.appendChild(hr);T.at_peak.forEach(a=>{const "
	"tr=el(\"tr\");tr.appendChild(el(\"td\",fmtB(a[0]),\"n\"));tr.appendChild(el(\"td\",String(a[1]),\"n\"));tr."
	"appendChild(el(\"td\",a[2],\"s\"));tb.appendChild(tr);});sec.appendChild(tb);}\n"
	"}\n"
	"SP_WINDOWS.forEach(render);\n"
	"</script>\n</body></html>\n";

/* s as a JavaScript string literal that is safe inside <script>: quotes, backslashes and control
 * characters escaped, and '<' as \u003c so no "</script" can end the element. Other bytes pass
 * (the page is UTF-8; the browser turns invalid bytes into U+FFFD). Can't fail. */
void sp_memtl_js_str(struct sp_out *o, const char *s)
{
	sp_out_puts(o, "\"");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			sp_out_printf(o, "\\%c", *p);
		else if (*p < 0x20 || *p == '<' || *p == 0x7f)
			sp_out_printf(o, "\\u%04x", *p);
		else
			sp_out_write(o, p, 1);
	}
	sp_out_puts(o, "\"");
}

/* s as HTML text (for the title): &, <, > and quotes escaped. Can't fail. */
static void html_text(struct sp_out *o, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&':
			sp_out_puts(o, "&amp;");
			break;
		case '<':
			sp_out_puts(o, "&lt;");
			break;
		case '>':
			sp_out_puts(o, "&gt;");
			break;
		case '"':
			sp_out_puts(o, "&quot;");
			break;
		default:
			sp_out_write(o, s, 1);
		}
	}
}

/* ns after t0 as milliseconds (negative before it). */
static void put_ms(struct sp_out *o, uint64_t t, uint64_t t0)
{
	sp_out_printf(o, "%.6f", ((double)t - (double)t0) / 1e6);
}

/* The series' points as "t":[...],"v":[...] (thinned by memtl.c to about SP_MEMTL_MAX_POINTS). */
static void put_points(struct sp_out *o, const struct sp_memtl *w, const struct sp_memtl_series *s)
{
	sp_out_puts(o, "\"t\":[");
	for (size_t i = 0; i < s->n; i++) {
		sp_out_puts(o, i ? "," : "");
		put_ms(o, s->pt[i].t, w->t0);
	}
	sp_out_puts(o, "],\"v\":[");
	for (size_t i = 0; i < s->n; i++)
		sp_out_printf(o, "%s%" PRIu64, i ? "," : "", s->pt[i].live);
	sp_out_puts(o, "]");
}

static int by_size(const void *a, const void *b, void *arg)
{
	const struct sp_memtl_alloc *al = arg;
	uint64_t x = al[*(const size_t *)a].size, y = al[*(const size_t *)b].size;
	return x > y ? -1 : x < y;
}

void sp_memtl_html_begin(struct sp_out *o, const char *trace, const struct sp_trace_header *h)
{
	char who[400];
	if (h->meta.rank >= 0)
		snprintf(who, sizeof(who), "host %s, rank %d of %d, pid %d", h->meta.host, h->meta.rank,
			 h->meta.world_size, h->meta.pid);
	else
		snprintf(who, sizeof(who), "host %s, pid %d", h->meta.host, h->meta.pid);
	sp_out_puts(o, page_head);
	sp_out_puts(o, "stepprof memory: ");
	html_text(o, trace);
	sp_out_puts(o, page_style);
	sp_out_puts(o, "<h1>Memory timeline: ");
	html_text(o, trace);
	sp_out_puts(o, "</h1>\n<p class=\"meta\">");
	html_text(o, who);
	sp_out_puts(o, "<br>");
	html_text(o, h->meta.command);
	sp_out_puts(o, "<br>Live bytes of each GPU (all device allocation kinds together) and of the host (malloc "
		       "family and pinned), counted from process start; hover the plot for the largest live "
		       "allocations.</p>\n");
}

/* Which of w's allocations go in the page: all, or the rows of the peak tables plus the largest
 * others (MAX_ALLOCS in all). Their indexes into sel (*nsel of them); pos[i]: allocation i's row,
 * -1 if left out. Exits if memory runs out. */
static void select_allocs(const struct sp_memtl *w, size_t *sel, size_t *nsel, long *pos)
{
	for (size_t i = 0; i < w->na; i++)
		pos[i] = w->na_all <= MAX_ALLOCS ? 0 : -1;
	for (size_t k = 0; k < w->ns && w->na_all > MAX_ALLOCS; k++)
		for (size_t i = 0; i < w->s[k].n_at_peak && i < MAX_PEAK_ROWS; i++)
			pos[w->s[k].at_peak[i]] = 0;
	if (w->na_all > MAX_ALLOCS) {
		size_t *bysize = malloc(w->na * sizeof(*bysize)), taken = 0;
		if (!bysize)
			sp_oom();
		for (size_t i = 0; i < w->na; i++) {
			bysize[i] = i;
			taken += pos[i] == 0;
		}
		sp_sort_r(bysize, w->na, sizeof(*bysize), by_size, w->a);
		for (size_t i = 0; i < w->na && taken < MAX_ALLOCS; i++)
			if (pos[bysize[i]] < 0) {
				pos[bysize[i]] = 0;
				taken++;
			}
		free(bysize);
	}
	for (size_t i = 0; i < w->na; i++)
		if (pos[i] == 0) {
			pos[i] = (long)*nsel;
			sel[(*nsel)++] = i;
		}
}

/* The window's object up to its series: id, steps, duration, the allocation kinds, its steps. */
static void put_head(struct sp_out *o, const struct sp_memtl *w)
{
	sp_out_printf(o,
		      "<section id=\"w%u\"></section>\n<script>SP_WINDOWS.push({\"id\":%u,\"first_step\":%" PRId64
		      ",\"last_step\":%" PRId64 ",\"complete\":%s,\"dur\":",
		      w->id, w->id, w->first_step, w->last_step, w->complete ? "true" : "false");
	put_ms(o, w->t1 > w->t0 ? w->t1 : w->t0, w->t0);
	sp_out_puts(o, ",\n\"kinds\":[");
	for (unsigned k = 0; k <= SP_MEM_HOST; k++) {
		sp_out_puts(o, k ? "," : "");
		sp_memtl_js_str(o, sp_mem_kind_name(k));
	}
	sp_out_puts(o, "],\n\"steps\":[");
	for (size_t i = 0; i < w->nstep; i++) {
		sp_out_printf(o, "%s[%" PRId64 ",", i ? "," : "", w->step[i].number);
		put_ms(o, w->step[i].start, w->t0);
		sp_out_puts(o, ",");
		put_ms(o, w->step[i].end, w->t0);
		sp_out_puts(o, "]");
	}
}

/* The window's series: label, peak, the rows alive at the peak (pos: rows of the allocations), points. */
static void put_series(struct sp_out *o, const struct sp_memtl *w, const long *pos)
{
	sp_out_puts(o, "],\n\"series\":[");
	for (size_t k = 0; k < w->ns; k++) {
		const struct sp_memtl_series *s = &w->s[k];
		size_t rows = 0;
		sp_out_puts(o, k ? ",\n{\"label\":" : "{\"label\":");
		sp_memtl_js_str(o, s->label);
		sp_out_printf(o, ",\"peak\":%" PRIu64 ",\"peak_ms\":", s->peak);
		put_ms(o, s->peak_t, w->t0);
		sp_out_printf(o, ",\"peak_ever\":%" PRIu64 ",\"n_at_peak\":%zu,\"at_peak\":[", s->peak_ever,
			      s->n_at_peak);
		for (size_t i = 0; i < s->n_at_peak && rows < MAX_PEAK_ROWS; i++)
			if (pos[s->at_peak[i]] >= 0)
				sp_out_printf(o, "%s%ld", rows++ ? "," : "", pos[s->at_peak[i]]);
		sp_out_puts(o, "],");
		put_points(o, w, s);
		sp_out_puts(o, "}");
	}
}

/* The selected allocations (sel[0..nsel)): series, made, freed, size, kind, stack. */
static void put_allocs(struct sp_out *o, const struct sp_memtl *w, const size_t *sel, size_t nsel)
{
	sp_out_puts(o, "],\n\"allocs\":[");
	for (size_t i = 0; i < nsel; i++) {
		const struct sp_memtl_alloc *a = &w->a[sel[i]];
		size_t k = 0;
		while (k + 1 < w->ns && w->s[k].device != a->device)
			k++;
		sp_out_printf(o, "%s[%zu,", i ? ",\n" : "", k);
		put_ms(o, a->made, w->t0);
		sp_out_puts(o, ",");
		if (a->freed == SP_MEMTL_NEVER)
			sp_out_puts(o, "null");
		else
			put_ms(o, a->freed, w->t0);
		sp_out_printf(o, ",%" PRIu64 ",%u,%u]", a->size, a->kind, a->stack);
	}
}

/* The frames of the selected allocations' stacks, then the program's line behind each stack with
 * Python frames (sp_sym_site), shown first. Exits if memory runs out. */
static void put_stacks(struct sp_out *o, const struct sp_memtl *w, const struct sp_trace_reader *r, struct sp_sym *sym,
		       const size_t *sel, size_t nsel)
{
	struct sp_idset stacks = { 0 };
	int first = 1;

	sp_out_puts(o, "],\n\"stacks\":{");
	for (size_t i = 0; i < nsel; i++) {
		uint32_t id = w->a[sel[i]].stack, n;
		const uint64_t *pcs = id ? sp_trace_stack(r, id, &n) : NULL;
		if (!pcs || !sp_idset_add(&stacks, id))
			continue;
		sp_out_printf(o, "%s\"%u\":[", first ? "" : ",\n", id);
		for (uint32_t f = 0; f < n && f < MAX_FRAMES; f++) {
			sp_out_puts(o, f ? "," : "");
			sp_memtl_js_str(o, sp_sym_frame(sym, pcs[f]));
		}
		sp_out_puts(o, "]");
		first = 0;
	}
	sp_out_puts(o, "},\n\"sites\":{");
	sp_idset_clear(&stacks);
	first = 1;
	for (size_t i = 0; i < nsel; i++) {
		uint32_t id = w->a[sel[i]].stack, n;
		const uint64_t *pcs = id ? sp_trace_stack(r, id, &n) : NULL;
		int user;
		if (!pcs || sp_sym_user_frame(sym, pcs, n, &user) < 0 || !sp_idset_add(&stacks, id))
			continue;
		sp_out_printf(o, "%s\"%u\":", first ? "" : ",\n", id);
		sp_memtl_js_str(o, sp_sym_site(sym, pcs, n));
		first = 0;
	}
	sp_out_puts(o, "}});</script>\n");
	sp_idset_free(&stacks);
}

void sp_memtl_html_window(struct sp_out *o, const struct sp_memtl *w, const struct sp_trace_reader *r,
			  struct sp_sym *sym)
{
	size_t *sel = malloc((w->na ? w->na : 1) * sizeof(*sel)), nsel = 0;
	long *pos = malloc((w->na ? w->na : 1) * sizeof(*pos));

	if (!sel || !pos)
		sp_oom();
	select_allocs(w, sel, &nsel, pos);
	put_head(o, w);
	put_series(o, w, pos);
	put_allocs(o, w, sel, nsel);
	put_stacks(o, w, r, sym, sel, nsel);
	free(sel);
	free(pos);
}

void sp_memtl_html_end(struct sp_out *o)
{
	sp_out_puts(o, page_script);
}
