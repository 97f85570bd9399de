set terminal pngcairo size 1000,620 font 'sans,10'
set output 'endpoint-scale-cdf.png'
set title 'walhook-bench endpoint-scale: commit-to-receipt latency CDF (2 CPUs, pooled over runs)'
set logscale x
set xlabel 'latency (ms, log scale)'
set ylabel 'fraction of deliveries'
set yrange [0:1.001]
set grid xtics ytics mxtics
set key bottom right
set arrow from graph 0, first 0.99 to graph 1, first 0.99 nohead dt 2 lc rgb 'gray'
set label 'p99' at graph 0.01, first 0.975 tc rgb 'gray'
plot 'data/endpoint-scale-2-000-endpoints-200-bad-67-500-67-2-0-s-66-hung-walhook.cdf' using 1:2 with lines lw 2 lc 1 title 'walhook, 2,000 endpoints, 200 bad (67 × 500, 67 × 2.0 s, 66 × hung)', 'data/endpoint-scale-2-000-endpoints-all-answer-at-once-control-walhook.cdf' using 1:2 with lines lw 2 lc 2 title 'walhook, 2,000 endpoints, all answer at once (control)'
