/**
 * The dashboard's script, bundled with its styles by scripts/build-dashboard.mjs into
 * dist/dashboard-assets/app.js and app.css. Every part does nothing on pages without its elements.
 */
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { setUpCopyButtons } from './copy.js';
import { setUpUsageChart } from './usage-chart.js';

function start() {
  setUpCopyButtons();
  setUpUsageChart();
}

// A module script runs after parsing anyway; this covers it being loaded some other way.
if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start, { once: true });
else start();
