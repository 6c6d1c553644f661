# Written by tdf_bench; rerun with: gnuplot tdf_bench.png.gp
set terminal pngcairo noenhanced size 1500,900 font 'sans,9'
set output 'tdf_bench.png'
set datafile missing 'NaN'
set grid
set key top left
set format y '%g'
set multiplot layout 2,3 title 'tdf_bench: time against n'
set title 'fib(n)'
set xlabel 'n'
set ylabel 'seconds per run'
set logscale y
unset logscale x
set autoscale x
plot 'tdf_bench.png.dat' index 0 using 1:6 with points pt 6 ps 1.5 lc rgb '#1f77b4' title 'paper static', \
     'tdf_bench.png.dat' index 0 using 1:7 with points pt 4 ps 1.5 lc rgb '#ff7f0e' title 'paper dynamic'
set title 'ack(3,n)'
set xlabel 'n'
set ylabel 'seconds per run'
set logscale y
unset logscale x
set autoscale x
plot 'tdf_bench.png.dat' index 1 using 1:6 with points pt 6 ps 1.5 lc rgb '#1f77b4' title 'paper static', \
     'tdf_bench.png.dat' index 1 using 1:7 with points pt 4 ps 1.5 lc rgb '#ff7f0e' title 'paper dynamic'
set title 'tak(x,y,z) against x'
set xlabel 'x'
set ylabel 'seconds per run'
set logscale y
unset logscale x
set autoscale x
plot 'tdf_bench.png.dat' index 2 using 1:6 with points pt 6 ps 1.5 lc rgb '#1f77b4' title 'paper static', \
     'tdf_bench.png.dat' index 2 using 1:7 with points pt 4 ps 1.5 lc rgb '#ff7f0e' title 'paper dynamic'
set title 'primes(n)'
set xlabel 'n'
set ylabel 'seconds per run'
set logscale y
unset logscale x
set autoscale x
plot 'tdf_bench.png.dat' index 3 using 1:6 with points pt 6 ps 1.5 lc rgb '#1f77b4' title 'paper static', \
     'tdf_bench.png.dat' index 3 using 1:7 with points pt 4 ps 1.5 lc rgb '#ff7f0e' title 'paper dynamic'
unset multiplot
