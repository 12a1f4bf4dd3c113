// The report's per-trial view: timeline and anomalies of the trial the reader opens (no network).
(function(){
const data = JSON.parse(document.getElementById('trial-data').textContent);
const byId = new Map(data.trials.map(t => [t.id, t]));
const NS = 'http://www.w3.org/2000/svg';
const colours = data.colours;
function el(tag, attrs, text){const e=document.createElement(tag);for(const k in attrs||{})e.setAttribute(k,attrs[k]);if(text!==undefined)e.textContent=text;return e;}
function svg(tag, attrs, text){const e=document.createElementNS(NS,tag);for(const k in attrs||{})e.setAttribute(k,attrs[k]);if(text!==undefined)e.textContent=text;return e;}
function badge(v){return el('span',{'class':'badge v-'+(v||'unknown')},v||'?');}
function timeline(t){
  const tl=t.timeline, W=900, left=70, lane=16, scale=(W-left-10)/Math.max(tl.end,1);
  const rows=[...new Set(tl.bars.map(b=>b.i))].sort((a,b)=>a-b);
  const H=40+rows.length*(lane*1.0)+tl.bars.length*0+60;
  const s=svg('svg',{width:W,height:H,'class':'timeline',role:'img'});
  s.appendChild(svg('title',{},'timeline of '+t.id));
  const x=v=>left+v*scale;
  for(const d of tl.drivers){const y=20+rows.indexOf(d.i)*lane;
    if(rows.indexOf(d.i)<0)continue;
    s.appendChild(svg('text',{x:4,y:y+11,'font-size':11},'driver '+d.i));
    const a=x(d.s||0), b=x(d.x!==undefined?d.x:tl.end);
    s.appendChild(svg('rect',{x:a,y:y+5,width:Math.max(b-a,1),height:2,fill:'#cbd5e1','class':'incarnation'}));}
  for(const z of tl.toxics){s.appendChild(svg('rect',{x:x(z.t0),y:12,width:Math.max(x(z.t1)-x(z.t0),2),height:rows.length*lane+12,fill:'#fde68a','fill-opacity':0.45,'class':'toxic'},'')).appendChild(svg('title',{},z.spec));}
  for(const b of tl.bars){const y=20+rows.indexOf(b.i)*lane;const ts=b.ph.filter(v=>v!==null);
    if(!ts.length)continue;const a=x(Math.min(...ts)),e=x(Math.max(...ts));
    const g=svg('g',{'class':'batch'});g.appendChild(svg('title',{},'batch '+b.b+' (driver '+b.i+'): '+tl.phases.map((p,k)=>b.ph[k]===null?null:p+' '+b.ph[k]+'s').filter(Boolean).join(', ')));
    g.appendChild(svg('rect',{x:a,y:y,width:Math.max(e-a,3),height:lane-4,fill:b.ph[5]===null?'#fecaca':'#bbf7d0',stroke:'#64748b','stroke-width':0.5}));
    b.ph.forEach((v,k)=>{if(v!==null)g.appendChild(svg('rect',{x:x(v)-1,y:y,width:2,height:lane-4,fill:colours[tl.phases[k]]}));});
    if(e-a>14)g.appendChild(svg('text',{x:a+2,y:y+9,'font-size':9},String(b.b)));
    s.appendChild(g);}
  const yb=20+rows.length*lane+8;
  for(const f of tl.faults){const g=svg('g',{'class':'fault-marker'});g.appendChild(svg('title',{},f.spec+' at '+f.t+'s'));
    g.appendChild(svg('line',{x1:x(f.t),x2:x(f.t),y1:12,y2:yb,stroke:'#dc2626','stroke-width':1.5}));
    g.appendChild(svg('path',{d:'M'+(x(f.t)-5)+' '+(yb+8)+' l5 -8 l5 8 z',fill:'#dc2626'}));
    g.appendChild(svg('text',{x:x(f.t)+6,y:yb+8,'font-size':10,fill:'#b91c1c'},f.spec));s.appendChild(g);}
  for(let k=0;k<=5;k++){const v=tl.end*k/5;s.appendChild(svg('text',{x:x(v)-8,y:H-6,'font-size':10,fill:'#64748b'},v.toFixed(0)+'s'));}
  return s;}
function anomalies(t){const box=el('div');
  for(const kind of ['lost','duplicated']){const items=t[kind];if(!items.length)continue;
    const tb=el('table',{'class':'anomalies'});const h=el('tr');
    for(const c of (t.inferred?['key','delta','batches','faults']:['id','key','batch','fault']))h.appendChild(el('th',{},c));
    tb.appendChild(h);
    for(const a of items){const r=el('tr');
      const cells=t.inferred?[a.key,a.delta,(a.batches||[]).join(' '),(a.faults||[]).join(', ')||'none']:[a.id,a.key,a.batch,a.fault||'none'];
      for(const c of cells)r.appendChild(el('td',{},String(c)));tb.appendChild(r);}
    box.appendChild(el('h4',{},kind+' ('+(t.counts[kind]||0)+', first '+items.length+')'));box.appendChild(tb);}
  if(t.unexpected.length){box.appendChild(el('h4',{},'unexpected ('+(t.counts.unexpected||0)+')'));
    const ul=el('ul');for(const u of t.unexpected)ul.appendChild(el('li',{},(u.id!==undefined?'id '+u.id:'key '+u.key)+': '+u.why));box.appendChild(ul);}
  for(const r of t.redelivered)box.appendChild(el('div',{'class':'muted'},'batch '+r.batch+' delivered '+r.times+' times, effective '+r.effective));
  if(t.cut){const c=t.cut;box.appendChild(el('div',{'class':c.ok===false?'bad cut':'cut'},
     c.ok===null?'consistent cut: no state dumped':c.ok?'consistent cut: state matches the oracle at '+c.checked+' checked batches (of '+c.committed+')':'consistent cut BROKEN: '+c.mismatches.map(m=>'batch '+m.batch+' key '+m.key).join('; ')));}
  return box;}
function show(id){const t=byId.get(id);const d=document.getElementById('detail');if(!t){return;}
  d.replaceChildren();
  const h=el('h3',{},t.id+' — '+t.pipeline+' ');h.appendChild(badge(t.verdict));d.appendChild(h);
  d.appendChild(el('div',{},'declared '+t.declared+'; '+(t.meets===false?'VIOLATES':t.meets===null?'inconclusive':'meets')+
     ' — '+t.events+' events, '+t.batches+' batches committed, '+t.restarts+' driver restart(s), '+t.seconds+'s, '+t.outcome+' '+t.reason));
  d.appendChild(el('div',{},'faults: '+(t.faults.join(' ')||'none')+(t.fired.length<t.faults.length?' (fired: '+(t.fired.join(' ')||'none')+')':'')));
  d.appendChild(timeline(t));
  const lg=el('div',{'class':'legend'});for(const p of data.phases){const s=el('span');s.appendChild(el('i',{'class':'sw',style:'background:'+colours[p]}));s.appendChild(document.createTextNode(p));lg.appendChild(s);}
  d.appendChild(lg);d.appendChild(anomalies(t));
  d.appendChild(el('div',{},'replay:'));d.appendChild(el('pre',{'class':'replay'},t.replay));
  for(const r of document.querySelectorAll('#trials tbody tr'))r.classList.toggle('sel',r.dataset.id===id);}
document.getElementById('trials').addEventListener('click',e=>{const r=e.target.closest('tr[data-id]');if(r){show(r.dataset.id);history.replaceState(null,'','#'+encodeURIComponent(r.dataset.id));}});
window.addEventListener('hashchange',()=>show(decodeURIComponent(location.hash.slice(1))));
const wanted=decodeURIComponent(location.hash.slice(1));
show(byId.has(wanted)?wanted:data.initial);
})();
