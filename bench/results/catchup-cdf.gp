set terminal pngcairo size 1000,620 font 'sans,10'
set output 'catchup-cdf.png'
set title 'walhook-bench catchup: commit-to-receipt latency CDF (2 CPUs, pooled over runs)'
set logscale x
set xlabel 'latency (ms, log scale)'
set ylabel 'fraction of deliveries'
set yrange [0:1.001]
set grid xtics ytics mxtics
set key bottom right
set arrow from graph 0, first 0.99 to graph 1, first 0.99 nohead dt 2 lc rgb 'gray'
set label 'p99' at graph 0.01, first 0.975 tc rgb 'gray'
plot 'data/catchup-from-the-slot-30-000-events-at-3-000-ev-s-while-walhook-is-down-10-s-then-0-ev-s-live-walhook.cdf' using 1:2 with lines lw 2 lc 1 title 'walhook, from the slot: 30,000 events at 3,000 ev/s while walhook is down 10 s, then 0 ev/s live', 'data/catchup-from-the-table-50-000-pending-for-a-down-endpoint-1-000-ev-s-live-over-4-healthy-walhook.cdf' using 1:2 with lines lw 2 lc 2 title 'walhook, from the table: 50,000 pending for a down endpoint, 1,000 ev/s live over 4 healthy'
