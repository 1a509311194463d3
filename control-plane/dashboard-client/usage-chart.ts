/**
 * The usage chart: daily spend per product as stacked bars, drawn with uPlot from the JSON the server puts in
 * `<script type="application/json" id="usage-chart-data">` into `<div id="usage-chart">`. The server also
 * renders the same figures as a table, so the chart is only a picture (the container is role="img").
 */
import uPlot from 'uplot';

interface ChartData {
  days: string[];
  series: { label: string; values: (number | null)[] }[];
}

declare global {
  interface Window {
    /** For the browser tests: what the chart drew. */
    __usageChart?: { points: number; series: number };
  }
}

const DAY = 86_400;
const HEIGHT = 300;
const FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
const TEXT = '#1f2328';
const GRID = '#d8dee4';

/**
 * Okabe–Ito-derived hues, darkened where needed so that each has at least 3:1 contrast against the white
 * background (3.9:1 to 7:1), and told apart with the common colour-vision deficiencies. A white edge
 * between the stacked parts of a bar separates neighbours whatever their colours.
 */
const PALETTE = ['#0072b2', '#d55e00', '#007a5a', '#b5357e', '#6a4c93', '#8a6d00', '#525a63'];

const dollars = new Intl.NumberFormat('en-US', { minimumFractionDigits: 0, maximumFractionDigits: 6 });

/** "$0.000125", "$1,234.5", "-$2": up to six decimals, trailing zeros trimmed. */
export function formatDollars(value: number): string {
  const text = dollars.format(Math.abs(value));
  return value < 0 && text !== '0' ? `-$${text}` : `$${text}`;
}

const dayLabel = new Intl.DateTimeFormat('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' });

/** "2026-11-01" → seconds since the epoch at that day's UTC midnight; NaN if it is no such day. */
function dayToSeconds(day: string): number {
  return /^\d{4}-\d{2}-\d{2}$/.test(day) ? Date.parse(`${day}T00:00:00Z`) / 1000 : Number.NaN;
}

function secondsToDay(seconds: number): string {
  return new Date(seconds * 1000).toISOString().slice(0, 10);
}

/** The payload, checked; anything malformed means no chart (the table still has the figures). */
function parse(text: string): ChartData | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const { days, series } = value as Record<string, unknown>;
  if (!Array.isArray(days) || !Array.isArray(series)) return undefined;
  if (!days.every((day) => typeof day === 'string' && Number.isFinite(dayToSeconds(day)))) return undefined;
  // uPlot needs ascending x values: put the days in order, and every series' values with them.
  const order = days.map((_day, i) => i).sort((a, b) => dayToSeconds(days[a]) - dayToSeconds(days[b]));
  const checked: ChartData['series'] = [];
  for (const entry of series) {
    if (typeof entry !== 'object' || entry === null) return undefined;
    const { label, values } = entry as Record<string, unknown>;
    if (!Array.isArray(values)) return undefined;
    checked.push({
      label: typeof label === 'string' ? label : `Series ${checked.length + 1}`,
      // Same length as the days; anything but a finite number is a gap.
      values: order.map((i) => {
        const v: unknown = values[i];
        return typeof v === 'number' && Number.isFinite(v) ? v : null;
      }),
    });
  }
  return { days: order.map((i) => days[i] as string), series: checked };
}

/** Where each bar starts and ends once stacked: positive values upwards from 0, negative ones downwards. */
function stack(series: ChartData['series'], length: number) {
  const up = new Array<number>(length).fill(0);
  const down = new Array<number>(length).fill(0);
  const bottoms: (number | null)[][] = [];
  const tops: (number | null)[][] = [];
  for (const { values } of series) {
    const bottom: (number | null)[] = [];
    const top: (number | null)[] = [];
    values.forEach((v, i) => {
      if (v === null) {
        bottom.push(null);
        top.push(null);
        return;
      }
      const base = v >= 0 ? (up[i] ?? 0) : (down[i] ?? 0);
      bottom.push(base);
      top.push(base + v);
      if (v >= 0) up[i] = base + v;
      else down[i] = base + v;
    });
    bottoms.push(bottom);
    tops.push(top);
  }
  return { bottoms, tops, min: Math.min(0, ...down), max: Math.max(0, ...up) };
}

/** Tick steps: whole days to years along x, and no finer than the sixth decimal along y. */
const X_INCRS = [1, 2, 3, 7, 14, 30, 60, 91, 182, 365].map((days) => days * DAY);
const Y_INCRS: number[] = [];
for (let exponent = -6; exponent <= 9; exponent++) {
  for (const mantissa of [1, 2, 2.5, 5]) Y_INCRS.push(Number((mantissa * 10 ** exponent).toPrecision(2)));
}

let measuringContext: CanvasRenderingContext2D | null | undefined;

/** Room for the widest y tick label, so that "$0.000125" is not cut off. */
function yAxisSize(_u: uPlot, values: string[] | null): number {
  const ticksAndGap = 10 + 5 + 6;
  if (!values?.length) return 40 + ticksAndGap;
  if (measuringContext === undefined) measuringContext = document.createElement('canvas').getContext('2d');
  let widest = 0;
  for (const value of values) {
    let width = value.length * 7.5;
    if (measuringContext) {
      measuringContext.font = FONT;
      width = measuringContext.measureText(value).width;
    }
    widest = Math.max(widest, width);
  }
  return Math.ceil(widest) + ticksAndGap;
}

function contentWidth(element: HTMLElement): number {
  const style = getComputedStyle(element);
  const padding = Number.parseFloat(style.paddingLeft) + Number.parseFloat(style.paddingRight);
  return Math.max(120, Math.floor(element.clientWidth - (Number.isFinite(padding) ? padding : 0)));
}

function draw(container: HTMLElement, data: ChartData) {
  const bars = uPlot.paths.bars;
  if (!bars) return;
  const xs = data.days.map(dayToSeconds);
  const { bottoms, tops, min, max } = stack(data.series, xs.length);
  const [yMin, yMax] =
    min === 0 && max === 0
      ? [0, 1]
      : uPlot.rangeNum(min, max, {
          min: { pad: 0.05, soft: 0, mode: 3 },
          max: { pad: 0.1, soft: 0, mode: 3 },
        });
  const facet = (rows: (number | null)[][]) => ({
    // BarsPathBuilderFacetUnit.ScaleValue: an ambient const enum, which isolated modules cannot read.
    unit: 1 as uPlot.Series.BarsPathBuilderFacetUnit,
    values: (_u: uPlot, seriesIdx: number) => rows[seriesIdx - 1] ?? [],
  });
  const paths = bars({ size: [0.7, 48, 1], disp: { y0: facet(bottoms), y1: facet(tops) } });

  const options: uPlot.Options = {
    width: contentWidth(container),
    height: HEIGHT,
    // Ticks at UTC midnights: the days are UTC days.
    tzDate: (seconds) => uPlot.tzDate(new Date(seconds * 1000), 'Etc/UTC'),
    cursor: { drag: { x: false, y: false }, y: false, points: { show: false } },
    legend: { live: true },
    scales: {
      x: {
        time: true,
        // The days shown, and half a day either side so that the first and last bars are whole. (Not
        // from uPlot's own range: for a single day, it spans 1,000 days when x is in seconds.)
        range: () => (xs.length ? [(xs[0] ?? 0) - DAY / 2, (xs[xs.length - 1] ?? 0) + DAY / 2] : [0, DAY]),
      },
      y: { range: () => [yMin, yMax] },
    },
    axes: [
      {
        font: FONT,
        stroke: TEXT,
        grid: { show: false },
        ticks: { stroke: GRID },
        incrs: X_INCRS,
        space: 56,
        // No days, no dates: an empty frame rather than 1 January 1970.
        values: (_u, splits) => splits.map((s) => (xs.length ? dayLabel.format(new Date(s * 1000)) : '')),
      },
      {
        font: FONT,
        stroke: TEXT,
        grid: { stroke: GRID, width: 1 },
        ticks: { stroke: GRID },
        incrs: Y_INCRS,
        space: 40,
        size: yAxisSize,
        values: (_u, splits) => splits.map(formatDollars),
      },
    ],
    series: [
      { label: 'Day', value: (_u, v) => (v === null ? '–' : secondsToDay(v)) },
      ...data.series.map(
        ({ label }, i): uPlot.Series => ({
          label,
          fill: PALETTE[i % PALETTE.length],
          // A white edge between the stacked parts of a bar.
          stroke: '#ffffff',
          width: 1,
          paths,
          points: { show: false },
          value: (_u, v) => (v === null ? '–' : formatDollars(v)),
        }),
      ),
    ],
  };

  const chart = new uPlot(options, [xs, ...data.series.map((s) => s.values)] as uPlot.AlignedData, container);

  let width = chart.width;
  let frame = 0;
  new ResizeObserver(() => {
    // Resizing on the next frame keeps ResizeObserver from reporting a layout loop.
    cancelAnimationFrame(frame);
    frame = requestAnimationFrame(() => {
      const next = contentWidth(container);
      if (next === width) return;
      width = next;
      chart.setSize({ width, height: HEIGHT });
    });
  }).observe(container);

  window.__usageChart = {
    points: data.series.reduce((sum, s) => sum + s.values.filter((v) => v !== null).length, 0),
    series: data.series.length,
  };
  container.dataset.drawn = 'true';
}

export function setUpUsageChart() {
  const source = document.getElementById('usage-chart-data');
  const container = document.getElementById('usage-chart');
  if (!(source instanceof HTMLScriptElement) || !container) return;
  const data = parse(source.textContent ?? '');
  if (data) draw(container, data);
}
